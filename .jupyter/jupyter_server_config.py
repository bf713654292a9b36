"""The project's Jupyter server config (``tasks.py lab`` puts this folder first on JUPYTER_CONFIG_PATH):
notebooks are saved with the language_info git stores, so opening one changes nothing git sees."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from strip_notebook_outputs import pre_save  # noqa: E402

c = get_config()  # noqa: F821
c.ContentsManager.pre_save_hook = pre_save
