"""The one PTX reader, plain Python over text (no GPU, no DSL): shared by the Triton oracle's float-tree checks
and the kernel's static checks (properties/codegen/).

    reader.py     Instruction, Program, parse: the instructions and labels of a kernel's PTX
    float_ops.py  the float arithmetic as ordered ops and canonical expression trees
    leaves.py     what each tree leaf holds: which element of which parameter, which parameter, which exchange
    flow.py       control flow around griddepcontrol.wait: reachability, global loads and their parameters
    sass.py       cuobjdump: SASS text, SASS opcodes, the cubin's registers, shared and local memory
"""
