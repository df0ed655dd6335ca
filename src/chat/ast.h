// Syntax tree of a parsed chat template: expressions and statements, mirroring jinja2's nodes.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace specd::chat {

enum class ExprKind {
  kConst,     // value
  kName,      // name
  kGetAttr,   // a.name
  kGetItem,   // a[b]
  kSlice,     // a[b:c:d] with b, c, d = items[0..2] (null when omitted)
  kCall,      // a(items..., kwargs..., *dyn_args, **dyn_kwargs)
  kFilter,    // a | name(items..., kwargs...); a is null in `{% filter %}` / `{% set x | f %}`
  kTest,      // a is name(items..., kwargs...)
  kNeg,       // -a
  kPos,       // +a
  kNot,       // not a
  kBinary,    // a <name> b for + - * / // % ** ~
  kAnd,       // a and b
  kOr,        // a or b
  kCompare,   // a ops[0] items[0] ops[1] items[1] ... (chained, as in Python)
  kCondExpr,  // b if a else c (c may be null)
  kList,      // [items...]
  kTuple,     // (items...)
  kDict,      // {items[0]: items[1], ...}
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args, dyn_kwargs;
  std::vector<std::string> ops;
  // Filter or test inside an `if` or inline if: an unknown name fails only when evaluated
  // (jinja2 rejects unknown names elsewhere when the template is compiled).
  bool soft = false;
};

// Left side of an assignment or loop variable: a name, `ns.attr`, or a tuple of targets.
struct Target {
  enum class Kind { kName, kNamespaceAttr, kTuple };
  Kind kind = Kind::kName;
  std::string name;
  std::string attr;
  std::vector<Target> items;
};

enum class NodeKind {
  kData,         // template text
  kOutput,       // {{ expr }} or {% print expr %}
  kIf,           // if / elif / else
  kFor,          // for target in iter [if cond] ... [else ...]
  kSet,          // set target = expr
  kSetBlock,     // set target [| filters] ... endset
  kMacro,        // macro name(params) ... endmacro
  kCallBlock,    // call[(params)] macro(...) ... endcall
  kFilterBlock,  // filter f ... endfilter
  kWith,         // with a = x, ... endwith
  kGeneration,   // generation ... endgeneration (transformers' extension: renders its body)
  kBreak,
  kContinue,
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param; null where there is no default
  Body body;
  int line = 0;
};

struct Node {
  NodeKind kind = NodeKind::kData;
  int line = 0;
  std::string text;                 // kData
  ExprPtr expr;                     // kOutput, kSet value, kFor iterable, kCallBlock call,
                                    // kFilterBlock / kSetBlock filter chain (input null)
  ExprPtr cond;                     // kFor loop filter
  std::vector<ExprPtr> conds;       // kIf: one condition per branch
  std::vector<Body> branches;       // kIf: one body per condition
  Target target;                    // kSet, kSetBlock, kFor
  std::vector<Target> targets;      // kWith
  std::vector<ExprPtr> values;      // kWith
  Body body;                        // kFor, kSetBlock, kFilterBlock, kWith, kGeneration, kCallBlock
  Body else_body;                   // kIf else, kFor else
  std::unique_ptr<MacroDef> macro;  // kMacro, kCallBlock (the caller)
};

}  // namespace specd::chat
