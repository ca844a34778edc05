"""Transfer bundles: everything an air-gapped machine needs, as a checked folder of files.

``create.py`` (connected machine: wheels, models, indexes, llama.cpp, manifest), ``manifest.py`` (the
manifest and its checks; standard library only, so it is also the bundle's ``install.py``), ``install.py``
(offline machine: check everything, then packages, models, indexes, engine)."""
