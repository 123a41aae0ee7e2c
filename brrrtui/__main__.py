import sys

from brrrtui.cli import main

sys.exit(main())
