"""The ``phrame`` console command that ties the parts together for people."""
