#pragma once
// Text renderings of the merged stacks (stack_tree.h): the console summary that fits a screen, and the full
// dump for a file. Tree lines are drawn with ASCII "|- " and "`- "; a line without one goes on with the path
// above it; a node whose rank set differs from its parent's starts with "[count] ranks <set>". Children come
// largest set first (the majority path), and of equal sets the one that branches further down first. Where
// most of a node's ranks go on and branch again, the others' branches come first and the majority's path
// continues in the same column, so that ranks leaving a path at many depths draw a column with branches off
// it rather than a staircase. A subtree that every rank of its parent runs alike (a background thread) comes
// after those that tell ranks apart, and on the screen is one line.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "diagnosis/stack_tree.h"

namespace distrun {

// A frame label for the screen: a path in it cut to its last two components
// ("wait (/usr/lib/python3.11/threading.py:320)" -> "wait (python3.11/threading.py:320)").
std::string ShortLabel(std::string_view label);

// The console screen, at most `max_lines` lines (0: no limit), each ending in '\n':
//   stacks of N ranks (M with a stack)
//   the tree, where a chain of frames with one rank set is its first frame, "... K frames ...", its last
//   frame (on one line when nothing branches below it), and at most 8 branches of a node are drawn
//   odd ranks: each class outside the majority, smallest first, with up to 8 of its ranks (host, pid, gpu
//   and the frame it is in)
// Past the limit the last line says how many lines were left out and that the full dump has them.
std::string RenderSummary(const StackTree& tree, const std::vector<RankStack>& ranks, size_t max_lines = 40);

// The full text for a file: each rank, ascending, as "== rank R (host H, pid P, gpu G, mechanism) ==" and
// its error or its threads' frames innermost first, then the merged tree with every frame and every branch.
std::string RenderFullDump(const StackTree& tree, const std::vector<RankStack>& ranks);
std::string RenderFullDump(const std::vector<RankStack>& ranks);  // builds the tree

}  // namespace distrun
