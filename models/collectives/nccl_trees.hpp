// NCCL's binary trees over nodes (src/graph/trees.cc), shared by the algorithms that run them
// across nodes: "tree" (chains inside the nodes) and "nvls_tree" (the NVSwitch reduces inside).
#pragma once

namespace stepsim {

struct TreeLinks {
  int parent      = -1;
  int children[2] = {-1, -1};
};

// ncclGetBtree: the in-order binary tree over n ranks rooted at 0 in which a rank's parent and
// children follow from its lowest set bit.
TreeLinks nccl_btree(int n, int rank);
// ncclGetDtree: tree 0 is the btree; tree 1 mirrors it (even n) or shifts it by one (odd n), so
// that a rank internal in one tree is a leaf in the other.
TreeLinks nccl_dtree(int n, int rank, int tree);

} // namespace stepsim
