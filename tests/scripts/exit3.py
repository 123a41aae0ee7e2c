import sys

print("about to exit 3")
sys.exit(3)
