"""The soak engine: batched differential runs of every implementation against the model on torch tensors.

``python -m properties.soak`` (make soak); see properties/soak/__main__.py for the options.
"""
