import sys

from udcg.cli import main

sys.exit(main())
