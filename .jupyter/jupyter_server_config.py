"""The project's Jupyter server config (``tasks.py lab`` puts this folder first on JUPYTER_CONFIG_PATH):
notebooks are saved with the language_info git stores, so opening one changes nothing git sees."""

import sys
from pathlib import Path

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from strip_notebook_outputs import pre_save  # noqa: E402


class ContentsManager(AsyncLargeFileManager):
    """The server's default contents manager with ``pre_save`` registered as a pre-save hook (set as
    ``ContentsManager.pre_save_hook`` in config, the server warns that the hook overrides itself)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.register_pre_save_hook(pre_save)


c = get_config()  # noqa: F821
c.ServerApp.contents_manager_class = ContentsManager
