def inner():
    raise ValueError("boom from the script")


inner()
