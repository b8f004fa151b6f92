import sys

from convatt.cli import main

sys.exit(main())
