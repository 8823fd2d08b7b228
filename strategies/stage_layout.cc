#include "strategies/stage_layout.h"

#include <cctype>
#include <cstdio>

#include "strategies/schedule.h"

namespace shardsim::strategies {
namespace {

constexpr size_t kMaxExpanded = size_t{1} << 20;  // symbols after expanding the repeats
constexpr int kMaxNesting = 64;                    // parentheses inside parentheses

std::string I(int64_t v) { return std::to_string(v); }

// The layout as errors quote it: its first 60 characters, printable ASCII only.
std::string Quoted(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < 60; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += std::isprint(c) ? static_cast<char>(c) : '?';
  }
  return "'" + out + (text.size() > 60 ? "...' (" + I(static_cast<int64_t>(text.size())) + " characters)" : "'");
}

std::string Printable(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (std::isprint(u)) return "'" + std::string(1, c) + "'";
  char code[8];
  std::snprintf(code, sizeof code, "0x%02x", u);
  return std::string("byte ") + code;
}

// Expands Megatron-core's layout syntax into its symbols (E, t, L, m, |). Recursive descent:
// sequence := item*; item := atom ('*' digits)?; atom := symbol | '(' sequence ')'.
class LayoutParser {
 public:
  explicit LayoutParser(const std::string& text) : text_(text) {}

  // The expanded symbols, or an error naming the character position.
  std::optional<std::string> Expand(std::string& error) {
    std::string out;
    if (!Sequence(out, error)) return std::nullopt;
    if (at_ < text_.size()) {
      error = "unexpected " + Printable(text_[at_]) + " at character " + I(static_cast<int64_t>(at_) + 1);
      return std::nullopt;
    }
    return out;
  }

 private:
  bool Sequence(std::string& out, std::string& error) {
    while (at_ < text_.size() && text_[at_] != ')') {
      std::string item;
      const char c = text_[at_];
      if (c == '(') {
        if (++depth_ > kMaxNesting) {
          error = "more than " + I(kMaxNesting) + " nested parentheses at character " + I(static_cast<int64_t>(at_) + 1);
          return false;
        }
        ++at_;
        if (!Sequence(item, error)) return false;
        --depth_;
        if (at_ >= text_.size() || text_[at_] != ')') {
          error =
              "unclosed '(' (expected ')' at character " + I(static_cast<int64_t>(at_) + 1) + ")";
          return false;
        }
        ++at_;
      } else if (c == 'E' || c == 't' || c == 'L' || c == 'm' || c == '|') {
        item = std::string(1, c);
        ++at_;
      } else if (c == ' ' || c == ',') {
        ++at_;  // cosmetic, as in Megatron-core (its example: Et*3|(tt|)*29,m|L)
        continue;
      } else {
        error = "unknown symbol " + Printable(c) + " at character " + I(static_cast<int64_t>(at_) + 1);
        return false;
      }
      int64_t repeat = 1;
      if (at_ < text_.size() && text_[at_] == '*') {
        ++at_;
        const size_t digits = at_;
        repeat = 0;
        while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
          repeat = repeat * 10 + (text_[at_] - '0');
          if (repeat > static_cast<int64_t>(kMaxExpanded)) break;
          ++at_;
        }
        if (at_ == digits) {
          error = "'*' at character " + I(static_cast<int64_t>(digits)) +
                  " must be followed by a repeat count";
          return false;
        }
      }
      if (item.size() * static_cast<size_t>(repeat) + out.size() > kMaxExpanded) {
        error = "expands to more than " + I(static_cast<int64_t>(kMaxExpanded)) + " symbols";
        return false;
      }
      for (int64_t i = 0; i < repeat; ++i) out += item;
    }
    return true;
  }

  const std::string& text_;
  size_t at_ = 0;
  int depth_ = 0;
};

struct Segment {
  int64_t embedding = 0, layers = 0, loss = 0, mtp = 0;
  bool embedding_first = true, loss_last = true;
};

Infeasibility LayoutError(const std::string& what, const std::string& valid,
                          const std::string& hint = "") {
  return Infeasibility{
      "pipeline_layout", what, valid,
      hint.empty() ? "Megatron-core syntax, e.g. E|(t|)*126L on 16 stages x 8 chunks" : hint};
}

// The expanded layout's segments, or why it is malformed.
std::optional<Infeasibility> Segments(const ModelSpec& m, const std::string& text,
                                      int64_t positions, std::vector<Segment>& out) {
  std::string error;
  LayoutParser parser(text);
  const std::optional<std::string> symbols = parser.Expand(error);
  if (!symbols) return LayoutError(Quoted(text) + ": " + error, "symbols E, t, L, m, |, (...)*N");
  out.assign(1, Segment{});
  bool decoder_after_mtp = false, seen_mtp = false;
  for (char c : *symbols) {
    Segment& s = out.back();
    if (c == '|') {
      out.emplace_back();
      continue;
    }
    if (c == 'E') {
      if (s.layers + s.loss + s.mtp > 0) s.embedding_first = false;
      ++s.embedding;
    } else if (c == 'L') {
      ++s.loss;
    } else {
      if (s.loss > 0) s.loss_last = false;
      (c == 't' ? s.layers : s.mtp)++;
      decoder_after_mtp = decoder_after_mtp || (c == 't' && seen_mtp);
      seen_mtp = seen_mtp || c == 'm';
    }
  }
  const int64_t chunks = static_cast<int64_t>(out.size());
  if (chunks != positions) {
    return LayoutError(Quoted(text) + " has " + I(chunks) + (chunks == 1 ? " chunk" : " chunks") + " but the plan's pipeline has " +
                           I(positions) + " model chunks in pipeline order",
                       I(positions) + " chunks separated by '|'", "one chunk per pipeline stage x chunks per stage, first to last");
  }
  int64_t layers = 0, embeddings = 0, losses = 0, mtp = 0;
  for (const Segment& s : out)
    layers += s.layers, embeddings += s.embedding, losses += s.loss, mtp += s.mtp;
  if (mtp != m.mtp_layers) {
    return LayoutError(Quoted(text) + " places " + I(mtp) + " multi-token-prediction " + (mtp == 1 ? "layer" : "layers") + " (m) but '" + m.name + "' has " +
                           (m.mtp_layers == 0 ? std::string("none") : I(m.mtp_layers)),
                       I(m.mtp_layers) + (m.mtp_layers == 1 ? " m symbol" : " m symbols"),
                       m.mtp_layers > 0 ? "add them after the last decoder layer (before L), or leave them out with a model JSON of mtp_layers 0 "
                                          "(shardsim describe --model " + m.name + " --write-model F)"
                                        : "remove the m symbols");
  }
  // Megatron-core's PipelineParallelLayerLayout.validate_layer_layout: the modules in one
  // virtual stage, after every decoder layer.
  int64_t mtp_chunks = 0;
  for (const Segment& s : out) mtp_chunks += s.mtp > 0 ? 1 : 0;
  if (mtp_chunks > 1 || decoder_after_mtp) {
    return LayoutError(Quoted(text) + (decoder_after_mtp ? " places a decoder layer (t) after a multi-token-prediction layer (m)"
                                                         : " spreads the multi-token-prediction layers (m) over " + I(mtp_chunks) + " chunks"),
                       "every m in one chunk, after every t", "as Megatron-core requires: Et*3|(tt|)*29,m|L");
  }
  if (layers != m.num_layers) {
    return LayoutError(Quoted(text) + " places " + I(layers) + " decoder layers (t) but '" + m.name +
                           "' has " + I(m.num_layers),
                       I(m.num_layers) + " t symbols");
  }
  if (embeddings != 1 || out.front().embedding != 1 || !out.front().embedding_first) {
    return LayoutError(Quoted(text) + " must hold one E, first in the first chunk", "E first");
  }
  if (losses != 1 || out.back().loss != 1 || !out.back().loss_last) {
    return LayoutError(Quoted(text) + " must hold one L, last in the last chunk", "L last");
  }
  return std::nullopt;
}

// Where a layout's multi-token-prediction modules may sit, after Segments: in the last chunk of
// their stage (Megatron-core's validate_layer_layout: the last virtual stage of its rank), and
// with the loss under schedules that run every part twice (DualPipe), whose copies shardsim does
// not split.
std::optional<Infeasibility> MtpPlacement(const Schedule& schedule, const PlanSpec& p, const std::vector<Segment>& segments) {
  const int64_t chunks = schedule.Chunks(p.mesh.pipeline, p.virtual_stages);
  for (int64_t s = 0; s < p.mesh.pipeline; ++s) {
    for (int64_t c = 0; c < chunks; ++c) {
      const ChunkPlace place = schedule.Place(p.mesh.pipeline, chunks, s, c);
      const Segment& seg = segments[static_cast<size_t>(place.position)];
      if (seg.mtp == 0) continue;
      if (schedule.Directions(p.mesh.pipeline) > 1) {
        if (seg.loss > 0) continue;
        return LayoutError(Quoted(p.pipeline_layout) + " places the multi-token-prediction layers (m) apart from the loss under " + p.pipeline_schedule,
                           "m with L", "shardsim keeps them beside the head where every part runs twice");
      }
      if (c != chunks - 1) {
        return LayoutError(Quoted(p.pipeline_layout) + " places the multi-token-prediction layers (m) in chunk " + I(c + 1) + " of stage " + I(s) +
                               "'s " + I(chunks),
                           "m in the last chunk of a stage", "Megatron-core runs them in the last virtual stage of a rank");
      }
    }
  }
  return std::nullopt;
}

int64_t Positions(const Schedule& schedule, const PlanSpec& p) {
  const int64_t chunks = schedule.Chunks(p.mesh.pipeline, p.virtual_stages);
  return p.mesh.pipeline * chunks / schedule.Directions(p.mesh.pipeline);
}

}  // namespace

std::vector<int64_t> DefaultPartLayers(int64_t num_layers, int64_t parts) {
  std::vector<int64_t> layers(static_cast<size_t>(parts), num_layers / parts + 1);
  int64_t shorter = parts - num_layers % parts;  // parts holding num_layers / parts
  for (int64_t i = 0; shorter > 0; ++i) {
    // Ends first: 0, parts - 1, 1, parts - 2, ...
    const int64_t part = i % 2 == 0 ? i / 2 : parts - 1 - i / 2;
    --layers[static_cast<size_t>(part)];
    --shorter;
  }
  return layers;
}

std::optional<Infeasibility> CheckLayout(const ModelSpec& m, const PlanSpec& p) {
  const int64_t positions = Positions(ScheduleOf(p), p);
  // The field to blame: virtual_stages when the plan asks for several, else the stages.
  const std::string field = p.virtual_stages > 1 && p.mesh.pipeline <= m.num_layers ? "virtual_stages" : "mesh/pipeline";
  if (!p.pipeline_layout.empty()) {
    // A layout may give the embedding and the loss chunks of their own and leave chunks empty,
    // but not many more chunks than there are things to hold (each one is a pipeline hop).
    const int64_t most = 2 * (m.num_layers + 2);
    if (positions > most) {
      return Infeasibility{field,
                           "pipeline x chunks per stage = " + I(positions) + " model chunks for the " + I(m.num_layers) + " layers of '" +
                               m.name + "' and its embedding and loss",
                           "at most " + I(most) + " chunks (twice what they fill)", "fewer stages or virtual stages"};
    }
    std::vector<Segment> segments;
    if (auto bad = Segments(m, p.pipeline_layout, positions, segments)) return bad;
    return MtpPlacement(ScheduleOf(p), p, segments);
  }
  if (positions > m.num_layers) {
    return Infeasibility{field,
                         "pipeline x chunks per stage = " + I(positions) +
                             " model chunks, more than the " + I(m.num_layers) + " layers of '" +
                             m.name + "'",
                         "at most " + I(m.num_layers) + " chunks",
                         "fewer stages or virtual stages, or a pipeline_layout with empty chunks"};
  }
  return std::nullopt;
}

StageLayout LayOut(const ModelSpec& m, const PlanSpec& p) {
  const Schedule& schedule = ScheduleOf(p);
  StageLayout layout;
  layout.stages = p.mesh.pipeline;
  layout.chunks = schedule.Chunks(layout.stages, p.virtual_stages);
  const int64_t positions = Positions(schedule, p);
  // Decoder layers and the embedding / loss per position.
  std::vector<Segment> segments;
  if (!p.pipeline_layout.empty()) {
    const auto bad = Segments(m, p.pipeline_layout, positions, segments);
    SHARDSIM_CHECK(!bad, "LayOut before CheckLayout: " + bad->what);
  } else {
    for (int64_t n : DefaultPartLayers(m.num_layers, positions))
      segments.push_back(Segment{0, n, 0, 0});
    segments.front().embedding = 1;
    segments.back().loss = 1;
    segments.back().mtp = m.mtp_layers;  // beside the head, Megatron-core's default place
  }
  std::vector<int64_t> first(static_cast<size_t>(positions) + 1, 0);
  for (int64_t j = 0; j < positions; ++j)
    first[static_cast<size_t>(j) + 1] =
        first[static_cast<size_t>(j)] + segments[static_cast<size_t>(j)].layers;
  layout.paths.assign(static_cast<size_t>(schedule.Directions(layout.stages)),
                      std::vector<std::pair<int64_t, int64_t>>(static_cast<size_t>(positions)));
  layout.at.resize(static_cast<size_t>(layout.stages));
  for (int64_t s = 0; s < layout.stages; ++s) {
    for (int64_t c = 0; c < layout.chunks; ++c) {
      const ChunkPlace place = schedule.Place(layout.stages, layout.chunks, s, c);
      const Segment& seg = segments[static_cast<size_t>(place.position)];
      ChunkLayout chunk;
      chunk.direction = place.direction;
      chunk.position = place.position;
      chunk.embedding = seg.embedding > 0;
      chunk.head = seg.loss > 0;
      chunk.first_layer = first[static_cast<size_t>(place.position)];
      chunk.layers = seg.layers;
      chunk.mtp = seg.mtp;
      layout.at[static_cast<size_t>(s)].push_back(chunk);
      layout.paths[static_cast<size_t>(place.direction)][static_cast<size_t>(place.position)] = {s,
                                                                                                 c};
    }
  }
  return layout;
}

std::string DescribePartLayers(const StageLayout& layout) {
  std::string out;
  const auto& path = layout.paths.front();
  for (size_t i = 0; i < path.size();) {
    const int64_t n = layout.Chunk(path[i].first, path[i].second).layers;
    size_t j = i;
    while (j < path.size() && layout.Chunk(path[j].first, path[j].second).layers == n) ++j;
    out += (out.empty() ? "" : ", ") +
           (j - i > 1 ? I(n) + " x " + I(static_cast<int64_t>(j - i)) : I(n));
    i = j;
  }
  return out;
}

namespace {

// Chunks' texts in pipeline order joined by '|', runs of equal ones collapsed: "(t*8|)*14".
std::string CollapseRuns(const std::vector<std::string>& segments) {
  std::string out;
  for (size_t i = 0; i < segments.size();) {
    size_t j = i;
    while (j < segments.size() && segments[j] == segments[i]) ++j;
    const bool last = j == segments.size();
    const size_t followed = j - i - (last ? 1 : 0);  // chunks of the run followed by a '|'
    if (followed > 1) out += "(" + segments[i] + "|)*" + std::to_string(followed);
    if (followed == 1) out += segments[i] + "|";
    if (last) out += segments[i];
    i = j;
  }
  return out;
}

std::string Repeated(char symbol, int64_t n) {
  return n == 1 ? std::string(1, symbol) : n > 1 ? std::string(1, symbol) + "*" + std::to_string(n) : "";
}

}  // namespace

std::string LayoutText(const StageLayout& layout) {
  std::vector<std::string> segments;
  for (const auto& [stage, chunk] : layout.paths.front()) {
    const ChunkLayout& c = layout.Chunk(stage, chunk);
    std::string text = c.embedding ? "E" : "";
    text += Repeated('t', c.layers);
    text += Repeated('m', c.mtp);
    segments.push_back(text + (c.head ? "L" : ""));
  }
  return CollapseRuns(segments);
}

std::string PartLayersText(const std::vector<int64_t>& layers, int64_t mtp) {
  std::vector<std::string> segments;
  for (size_t i = 0; i < layers.size(); ++i) {
    segments.push_back((i == 0 ? "E" : "") + Repeated('t', layers[i]) + (i + 1 == layers.size() ? Repeated('m', mtp) + "L" : ""));
  }
  return CollapseRuns(segments);
}

}  // namespace shardsim::strategies
