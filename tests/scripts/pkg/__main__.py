import sys

print("module run", __name__, sys.argv[1:])
