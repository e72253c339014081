"""Connected folders: providers that list a folder's changes and fetch a file's bytes."""
