"""The two hardware approximations of the H200's MUFU unit, measured: tables, baselines, provenance.

``python -m oracles.mufu measure`` measures the tables on a GPU and writes them into ``data/``;
``python -m oracles.mufu prove`` compares the NumPy model with the hardware over every input;
``recheck.check`` says whether the tables hold on the GPU here (another model: a sample measured again).
"""
