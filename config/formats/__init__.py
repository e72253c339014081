"""Format modules for FORMAT_MODULE_PATH: the admin shows times with seconds."""
