"""One study per notebook, each ``run(params) -> Result`` on the skeleton of ``base``: a module where the
study is one file (``model_setup`` 01, ``executor_timing`` 02), a package where it has several
(``thunder_traces`` 03, ``microbench`` 04, ``host_overhead`` 05, ``scaling`` 06, ``levers`` 07, ``ab`` 08;
the study itself is the package's ``study`` module). Studies import ``core``, ``instruments`` and ``pages``,
never each other."""
