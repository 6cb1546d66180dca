"""What crosses Flower, and nothing of Flower: the codec both sides import.

:mod:`.codec` turns every core message into a payload (named numpy arrays and a flat config) and
back; :mod:`.summed` is the vector SecAgg+ sums; :mod:`.npy` reads and writes the ``.npy`` bytes.
The Flower containers are the adapters' (``flower_shared/records.py``, ``strategies/legacy.py``).
"""
