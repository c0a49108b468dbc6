"""``raypipe convert``: a class-folder tree or a file list into a container format that
raypipe and DALI read."""
