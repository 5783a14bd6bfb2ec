# gabbi's pytest plugin starts and stops each YAML file's fixtures around
# its tests; it must be registered before collection.
pytest_plugins = ['gabbi.pytester']
