"""pytest setup shared by tests/ and the nbval run over book/*.ipynb.

Progress bars are switched off (TQDM_DISABLE=1) before any kernel starts, as when the chapters'
stored outputs were made by tools/execute.py: a bar's rates differ on every run.
"""

import os

os.environ.setdefault("TQDM_DISABLE", "1")
