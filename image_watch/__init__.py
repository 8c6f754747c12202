"""The image watcher (``phrame image-watch``): newer image tags, allowed by an environment's
``images:`` policy, proposed as a branch (and a GitLab merge request) pinning the new digest."""
