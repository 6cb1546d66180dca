"""The adapters that run the core: Flower's app entry points (``server_app``, ``client_app``), the command line
(:mod:`.cli`), the Flower engines and their processes (:mod:`.flower`), sweeps (:mod:`.experiments`), reports
(:mod:`.reports`) and the experiment grids of the paper's figures and the maps (``configs/``)."""
