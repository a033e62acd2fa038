"""`python -m lib`: list or run the paper-scale experiments that the chapters register.

python -m lib                               list them, with their presets
python -m lib NAME --preset paper           run one; writes results/<chapter>/NAME.json
"""

import importlib
import sys

import lib

for module in lib.MODULES:
    importlib.import_module(f"lib.{module}")

from lib.record import main  # noqa: E402

sys.exit(main())
