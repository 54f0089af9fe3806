"""The quick-start demos, kept out of the ``icefloe`` library: they train
PyTorch models from an icefloe cache beside the same loop reading Parquet.

``python -m icefloe_demo`` (``./dev.sh demo``, ``icefloe demo``) runs the
review demo (:mod:`icefloe_demo.text`); ``--numeric`` the earlier numeric one
(:mod:`icefloe_demo.numeric`, which also holds the pieces both share).
"""
