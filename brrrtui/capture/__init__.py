"""Code that runs inside the user's process (the child). UI-free, and it imports torch only once the user's
script has imported it."""
