"""The reviewed plan stays the plan: plan digests, remembered per merge request, checked on merge."""
