"""IR texts shared by several test modules."""

FUSED = """
module: "main"
x = @param:x -> float_type, {2, 3}, {3, 1}
y = @param:y -> float_type, {2, 3}, {3, 1}
@2 = pointwise(x,y), [main:pointwise0] -> float_type, {2, 3}, {3, 1}
@3 = @return(@2)

module: "main:pointwise0" bypass
main:pointwise0:x0 = @param:x0 -> float_type, {1}, {0}
main:pointwise0:x1 = @param:x1 -> float_type, {1}, {0}
main:pointwise0:@2 = add(main:pointwise0:x0,main:pointwise0:x1) -> float_type, {1}, {0}
main:pointwise0:@3 = @literal{2} -> float_type, {1}, {0}
main:pointwise0:@4 = mul(main:pointwise0:@2,main:pointwise0:@3) -> float_type, {1}, {0}
main:pointwise0:@5 = @return(main:pointwise0:@4)
"""

# A small chain every pipeline touches (identity removal, fusion): explorer tests use it.
CHAIN = """
x = @param:x -> float_type, {2, 8}, {8, 1}
@1 = identity(x) -> float_type, {2, 8}, {8, 1}
@2 = relu(@1) -> float_type, {2, 8}, {8, 1}
@3 = neg(@2) -> float_type, {2, 8}, {8, 1}
@4 = exp(@3) -> float_type, {2, 8}, {8, 1}
@5 = @return(@4)
"""

# An identity to remove and a dead neg: the pass-manager tests run DCE and EliminateIdentity on it.
IDENTITY_AND_DEAD = """
x = @param:x -> float_type, {4}, {1}
@1 = identity(x) -> float_type, {4}, {1}
@2 = relu(@1) -> float_type, {4}, {1}
@3 = neg(x) -> float_type, {4}, {1}
@4 = @return(@2)
"""
