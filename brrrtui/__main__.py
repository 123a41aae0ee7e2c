import sys

try:
    from brrrtui.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python imports brrrtui: the exit status of a SIGINT, no traceback
    sys.exit(130)

sys.exit(main())
