"""A drop-in re-implementation of the OpenStack Placement API service."""
