// The plan report page (html_report.h). SVG is written here, by hand: three charts of rectangles,
// lines and text need no library, and the page must open anywhere with nothing fetched.
#include "emo/report/html_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "emo/model/kernel_class.h"
#include "emo/model/kernel_work.h"
#include "emo/model/pack_model.h"
#include "emo/packing/packer.h"

namespace emo::report {
namespace {

using nlohmann::json;

// ---- The data -----------------------------------------------------------------------------

// The option of `options` (ascending by clock) nearest to `clock`.
const model::ClockOption& OptionAt(const std::vector<model::ClockOption>& options, MegaHertz clock) {
  size_t best = 0;
  for (size_t i = 1; i < options.size(); ++i) {
    if (std::abs(options[i].clock.value() - clock.value()) < std::abs(options[best].clock.value() - clock.value())) best = i;
  }
  return options[best];
}

json EnergyByClass(const opt::PlannedTrace& pt, const packing::PackingInput& input,
                   const std::unordered_map<graph::NodeId, size_t>& pack_of) {
  const auto& plan = pt.plan;
  const model::DeviceModel device = plan.PlannedDevice(*pt.device);
  // Per pack and class, the busy seconds of its ops (as measured on the plan's timeline), each
  // with its kind's clock-bound share (the input's clock_class is the op's share kind).
  std::vector<std::array<model::ClassTimes, model::kNumKernelClasses>> busy(plan.packs.size());
  for (const auto& d : input.devices) {
    for (const auto& op : d.ops) {
      auto it = pack_of.find(op.node);
      if (it == pack_of.end()) continue;
      const model::KernelClass c = model::ShareKindClass(op.clock_class);
      busy[it->second][static_cast<size_t>(c)].Add(c, static_cast<double>(op.duration) * 1e-9, 1.0,
                                                   device.CompShare(op.clock_class));
    }
  }
  json out = json::object();
  for (int c = 0; c < model::kNumKernelClasses; ++c) {
    double at_default = 0, at_plan = 0, seconds = 0;
    for (size_t p = 0; p < plan.packs.size(); ++p) {
      const model::ClassTimes& times = busy[p][static_cast<size_t>(c)];
      if (times.Total() <= 0) continue;
      const auto options = model::PackClockOptions(device, times, plan.throttle_clock);
      if (options.empty()) continue;
      at_default += OptionAt(options, device.default_clock).energy_j;
      at_plan += OptionAt(options, plan.packs[p].clock).energy_j;
      seconds += times.Total();
    }
    if (seconds <= 0) continue;
    out[std::string(model::KernelClassName(static_cast<model::KernelClass>(c)))] = {
        {"busy_us", seconds * 1e6}, {"default_j", at_default}, {"plan_j", at_plan}};
  }
  return out;
}

}  // namespace

json ReportData(const opt::PlannedTrace& pt) {
  const auto& a = *pt.analysis;
  const auto& plan = pt.plan;
  const auto& device = *pt.device;
  std::unordered_map<graph::NodeId, size_t> pack_of;
  for (size_t i = 0; i < plan.packs.size(); ++i) {
    for (graph::NodeId v : plan.packs[i].pack.ops) pack_of[v] = i;
  }
  const std::unordered_set<graph::NodeId> critical(a.steady_path.nodes.begin(), a.steady_path.nodes.end());
  const std::vector<int> kinds = model::ShareKindsOf(*a.trace);  // as the plan's pack model reads them
  const packing::PackingInput input =
      packing::InputOf(a, [&](uint32_t op) { return static_cast<uint8_t>(kinds[op]); });
  // The iteration: from its first pack (or op) to its end.
  TimeNs t0 = std::numeric_limits<TimeNs>::max(), t1 = 0;
  for (const auto& p : plan.packs) {
    t0 = std::min(t0, p.pack.start);
    t1 = std::max(t1, p.pack.end);
  }
  for (const auto& d : input.devices) {
    if (!d.ops.empty()) t0 = std::min(t0, d.ops.front().start);
    t1 = std::max(t1, d.end);
  }
  if (t0 > t1) t0 = t1;
  auto us = [&](TimeNs t) { return NsToUs(t - t0); };
  json gpus = json::array();
  for (const auto& d : input.devices) {
    json start = json::array(), dur = json::array(), slack = json::array(), pack = json::array(),
         on_path = json::array(), cls = json::array();
    for (const auto& op : d.ops) {
      start.push_back(us(op.start));
      dur.push_back(NsToUs(op.duration));
      slack.push_back(NsToUs(op.slack));
      auto it = pack_of.find(op.node);
      pack.push_back(it == pack_of.end() ? -1 : static_cast<int64_t>(it->second));
      on_path.push_back(critical.count(op.node) ? 1 : 0);
      cls.push_back(static_cast<int>(model::ShareKindClass(op.clock_class)));
    }
    gpus.push_back({{"device", d.device},
                    {"end_us", us(d.end)},
                    {"ops", {{"start_us", start}, {"dur_us", dur}, {"slack_us", slack}, {"pack", pack},
                             {"critical", on_path}, {"class", cls}}}});
  }
  json packs = json::array();
  for (const auto& p : plan.packs) {
    packs.push_back({{"device", p.pack.device},
                     {"start_us", us(p.pack.start)},
                     {"end_us", us(p.pack.end)},
                     {"clock_mhz", p.clock.value()},
                     {"ops", p.pack.ops.size()}});
  }
  json frontier = json::array();
  for (const auto& f : plan.frontier) frontier.push_back({NsToUs(f.time_ns), f.energy_j});
  json classes = json::array();
  for (int c = 0; c < model::kNumKernelClasses; ++c) {
    classes.push_back(std::string(model::KernelClassName(static_cast<model::KernelClass>(c))));
  }
  return {{"iteration_us", us(t1)},
          {"clocks_mhz", {{"min", device.clocks.empty() ? 0.0 : device.clocks.front().value()},
                          {"default", device.default_clock.value()}}},
          {"classes", classes},
          {"gpus", gpus},
          {"packs", packs},
          {"frontier", frontier},
          {"pack_graph", {{"baseline", {NsToUs(plan.pack_graph.baseline.time_ns), plan.pack_graph.baseline.energy_j}},
                          {"plan", {NsToUs(plan.pack_graph.plan.time_ns), plan.pack_graph.plan.energy_j}}}},
          {"energy_by_class", EnergyByClass(pt, input, pack_of)}};
}

// ---- The page -----------------------------------------------------------------------------

namespace {

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A field of a saved JSON read leniently: a missing field or one of another type gives `otherwise`
// (the page is drawn from a file a user may have edited; it must not throw).
const json* Field(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}
double Num(const json& j, const char* key, double otherwise = 0) {
  const json* f = Field(j, key);
  return f != nullptr && f->is_number() ? f->get<double>() : otherwise;
}
std::string Str(const json& j, const char* key, const char* otherwise) {
  const json* f = Field(j, key);
  return f != nullptr && f->is_string() ? f->get<std::string>() : otherwise;
}
bool Bool(const json& j, const char* key, bool otherwise) {
  const json* f = Field(j, key);
  return f != nullptr && f->is_boolean() ? f->get<bool>() : otherwise;
}
const json& Obj(const json& j, const char* key) {
  static const json kNone = json::object();
  const json* f = Field(j, key);
  return f != nullptr && f->is_object() ? *f : kNone;
}

// The opening tag of one chart: `attributes` (id, class) and its size in px.
std::string SvgOpen(const std::string& attributes, double width, double height) {
  return fmt::format("<svg {0} width=\"{1}\" height=\"{2}\" viewBox=\"0 0 {1} {2}\" xmlns=\"http://www.w3.org/2000/svg\" "
                     "font-size=\"11\">\n",
                     attributes, width, height);
}

// A clock's colour: blue at the device's lowest clock, through yellow, to red at its default.
std::string ClockColor(double mhz, double lo, double hi) {
  const double x = hi > lo ? std::clamp((mhz - lo) / (hi - lo), 0.0, 1.0) : 1.0;
  const std::array<std::array<double, 3>, 3> stops = {{{49, 130, 189}, {254, 224, 139}, {215, 48, 39}}};
  const double s = x * 2;
  const size_t i = std::min<size_t>(1, static_cast<size_t>(s));
  const double f = s - static_cast<double>(i);
  std::array<int, 3> rgb{};
  for (size_t k = 0; k < 3; ++k) rgb[k] = static_cast<int>(std::lround(stops[i][k] + f * (stops[i + 1][k] - stops[i][k])));
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

// Round tick steps (1, 2, 5 x 10^k) giving about `n` ticks over [0, span].
double TickStep(double span, int n) {
  if (span <= 0) return 1;
  const double raw = span / n;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10 * p;
}

constexpr double kWidth = 1100, kLeft = 70, kRight = 20;

std::string TimelineSvg(const json& r, size_t g) {
  const json& gpu = r["gpus"][g];
  const double span = std::max(1e-9, Num(r, "iteration_us"));
  const double lo = Num(r["clocks_mhz"], "min"), hi = Num(r["clocks_mhz"], "default");
  const double plot = kWidth - kLeft - kRight;
  const double lane_y = 28, lane_h = 70, height = lane_y + lane_h + 40;
  auto x = [&](double t) { return kLeft + plot * std::clamp(t / span, 0.0, 1.0); };
  const int device = static_cast<int>(Num(gpu, "device"));
  std::string s = SvgOpen(fmt::format("class=\"timeline\" id=\"timeline-gpu{}\"", device), kWidth, height);
  s += fmt::format("<text x=\"0\" y=\"{}\" font-weight=\"bold\">GPU {}</text>\n", lane_y + lane_h / 2, device);
  // Packs, coloured by their planned clock.
  for (const auto& p : r["packs"]) {
    if (static_cast<int>(Num(p, "device", -1)) != device) continue;
    const double x0 = x(Num(p, "start_us")), x1 = x(Num(p, "end_us"));
    s += fmt::format(
        "<rect class=\"pack\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\" fill-opacity=\"0.35\" "
        "stroke=\"#555\"><title>pack at {:.0f} MHz, {:.1f}-{:.1f} us, {} ops</title></rect>\n",
        x0, lane_y, std::max(0.5, x1 - x0), lane_h, ClockColor(Num(p, "clock_mhz"), lo, hi), Num(p, "clock_mhz"),
        Num(p, "start_us"), Num(p, "end_us"), Num(p, "ops"));
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" fill=\"#333\">{:.0f} MHz</text>\n", x0 + 3, lane_y - 4,
                     Num(p, "clock_mhz"));
  }
  // Ops: with slack grey, on the critical path dark red; under the lane, each op's slack as a
  // bar whose height grows with it (full at a tenth of the iteration or more).
  const json& ops = gpu["ops"];
  const size_t n = ops["start_us"].size();
  const double op_y = lane_y + 6, op_h = lane_h - 24, slack_y = lane_y + lane_h - 2, slack_h = 16;
  std::string slack_rects, op_rects, path_rects;
  for (size_t i = 0; i < n; ++i) {
    const double t = ops["start_us"][i].get<double>(), d = ops["dur_us"][i].get<double>();
    const double sl = ops["slack_us"][i].get<double>();
    const double x0 = x(t), w = std::max(0.4, x(t + d) - x0);
    if (sl > 0) {
      const double bar = slack_h * std::min(1.0, sl / (span / 10));
      slack_rects += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\"/>", x0,
                                 slack_y - bar, w, bar);
    }
    std::string& into = ops["critical"][i].get<int>() ? path_rects : op_rects;
    into += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\"/>", x0, op_y, w, op_h);
  }
  s += "<g class=\"slack\" fill=\"#2a9d8f\" fill-opacity=\"0.8\">" + slack_rects + "</g>\n";
  s += "<g class=\"op\" fill=\"#6b6b6b\">" + op_rects + "</g>\n";
  s += "<g class=\"critical\" fill=\"#8b0000\">" + path_rects + "</g>\n";
  // The time axis (ms).
  const double axis_y = lane_y + lane_h + 12;
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", kLeft, axis_y, kLeft + plot, axis_y);
  const double step = TickStep(span, 10);
  for (double t = 0; t <= span + 1e-9; t += step) {
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#333\"/><text x=\"{0:.1f}\" "
                     "y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
                     x(t), axis_y, axis_y + 4, axis_y + 16, t / 1000);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">ms</text>\n", kWidth - 2, axis_y + 16);
  return s + "</svg>\n";
}

std::string ClockLegend(const json& r) {
  const double lo = Num(r["clocks_mhz"], "min"), hi = Num(r["clocks_mhz"], "default");
  std::string s = SvgOpen("class=\"legend\"", 1000, 34);
  for (int i = 0; i <= 20; ++i) {
    const double mhz = lo + (hi - lo) * i / 20.0;
    s += fmt::format("<rect x=\"{}\" y=\"4\" width=\"12\" height=\"12\" fill=\"{}\" fill-opacity=\"0.6\"/>", 90 + i * 12,
                     ClockColor(mhz, lo, hi));
  }
  s += fmt::format(
      "<text x=\"0\" y=\"14\">pack clock</text><text x=\"90\" y=\"30\">{:.0f} MHz</text>"
      "<text x=\"342\" y=\"30\" text-anchor=\"end\">{:.0f} MHz (default)</text>"
      "<rect x=\"370\" y=\"4\" width=\"12\" height=\"12\" fill=\"#8b0000\"/><text x=\"386\" y=\"14\">op on the critical path</text>"
      "<rect x=\"520\" y=\"4\" width=\"12\" height=\"12\" fill=\"#6b6b6b\"/><text x=\"536\" y=\"14\">op with slack</text>"
      "<rect x=\"630\" y=\"4\" width=\"12\" height=\"12\" fill=\"#2a9d8f\" fill-opacity=\"0.8\"/><text x=\"646\" y=\"14\">its slack (bar under the op, full at 1/10 of the iteration)</text>",
      lo, hi);
  return s + "</svg>\n";
}

struct Point {
  std::string label;
  double time_us = 0, energy_j = 0;
  std::string color;
};

std::string FrontierSvg(const json& plan) {
  const json& r = plan["report"];
  std::vector<std::array<double, 2>> front;
  for (const auto& p : r["frontier"]) front.push_back({p[0].get<double>(), p[1].get<double>()});
  std::vector<Point> marks;
  auto mark = [&](const std::string& label, const json& j, const char* color) {
    if (j.is_object() && j.contains("time_us") && j.contains("energy_j")) {
      marks.push_back({label, Num(j, "time_us"), Num(j, "energy_j"), color});
    }
  };
  mark("default clock", plan["baseline"], "#222222");
  if (plan.contains("static_best")) {
    mark(fmt::format("static {:.0f} MHz", Num(plan["static_best"], "clock_mhz")), plan["static_best"], "#7b3294");
  }
  mark("pass-level", Obj(Obj(plan, "baselines"), "pass_level"), "#e66101");
  mark("per-kernel, no slack", Obj(Obj(plan, "baselines"), "per_kernel_blind"), "#8c8c8c");
  mark("EMO plan", plan["plan"], "#008837");
  double t_lo = std::numeric_limits<double>::infinity(), t_hi = -t_lo, e_lo = t_lo, e_hi = -t_lo;
  auto extend = [&](double t, double e) {
    t_lo = std::min(t_lo, t), t_hi = std::max(t_hi, t), e_lo = std::min(e_lo, e), e_hi = std::max(e_hi, e);
  };
  for (const auto& f : front) extend(f[0], f[1]);
  for (const auto& m : marks) extend(m.time_us, m.energy_j);
  if (!(t_lo < t_hi)) t_lo -= 1, t_hi += 1;
  if (!(e_lo < e_hi)) e_lo -= 1, e_hi += 1;
  const double tp = (t_hi - t_lo) * 0.06, ep = (e_hi - e_lo) * 0.08;
  t_lo -= tp, t_hi += tp, e_lo -= ep, e_hi += ep;
  const double w = 620, h = 380, left = 70, bottom = 40, top = 14, right = 150;
  auto x = [&](double t) { return left + (w - left - right) * (t - t_lo) / (t_hi - t_lo); };
  auto y = [&](double e) { return top + (h - top - bottom) * (1 - (e - e_lo) / (e_hi - e_lo)); };
  std::string s = SvgOpen("id=\"frontier\"", w, h) +
                  fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", left,
                              top, w - left - right, h - top - bottom);
  const double ts = TickStep(t_hi - t_lo, 5), es = TickStep(e_hi - e_lo, 5);
  for (double t = std::ceil(t_lo / ts) * ts; t <= t_hi; t += ts) {
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", x(t), h - bottom + 14, t / 1000);
  }
  for (double e = std::ceil(e_lo / es) * es; e <= e_hi; e += es) {
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", left - 4, y(e) + 4, e);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">iteration time (ms)</text>\n",
                   left + (w - left - right) / 2, h - 6);
  s += fmt::format("<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">energy per "
                   "iteration (J, predicted)</text>\n",
                   top + (h - top - bottom) / 2, top + (h - top - bottom) / 2);
  if (!front.empty()) {
    std::string pts;
    for (const auto& f : front) pts += fmt::format("{:.1f},{:.1f} ", x(f[0]), y(f[1]));
    s += "<polyline class=\"frontier\" fill=\"none\" stroke=\"#2166ac\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n";
    for (const auto& f : front) {
      s += fmt::format("<circle class=\"frontier-point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" fill=\"#2166ac\"/>", x(f[0]), y(f[1]));
    }
    s += "\n";
  }
  for (size_t i = 0; i < marks.size(); ++i) {
    const auto& m = marks[i];
    s += fmt::format(
        "<circle class=\"mark\" cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"5\" fill=\"{2}\"><title>{3}: {4:.1f} us, {5:.3f} "
        "J</title></circle><line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{6}\" y2=\"{7}\" stroke=\"{2}\" "
        "stroke-width=\"0.5\"/><text x=\"{8}\" y=\"{9}\" fill=\"{2}\">{3}</text>\n",
        x(m.time_us), y(m.energy_j), m.color, Escape(m.label), m.time_us, m.energy_j, w - right + 8,
        top + 12 + 18 * static_cast<double>(i), w - right + 10, top + 16 + 18 * static_cast<double>(i));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#2166ac\">frontier (pack graph)</text>\n", w - right + 10,
                   top + 16 + 18 * static_cast<double>(marks.size()));
  return s + "</svg>\n";
}

std::string EnergySvg(const json& r) {
  const json& by = r["energy_by_class"];
  double top_j = 0;
  for (const auto& [name, v] : by.items()) top_j = std::max({top_j, Num(v, "default_j"), Num(v, "plan_j")});
  const double w = 440, row = 46, left = 110, h = 30 + row * static_cast<double>(std::max<size_t>(1, by.size()));
  std::string s = SvgOpen("id=\"energy-by-class\"", w, h);
  double yy = 8;
  for (const auto& [name, v] : by.items()) {
    const double d = Num(v, "default_j"), p = Num(v, "plan_j");
    auto bar = [&](double j) { return top_j > 0 ? (w - left - 90) * j / top_j : 0; };
    s += fmt::format("<text x=\"0\" y=\"{:.1f}\">{}</text>\n", yy + 18, Escape(name));
    s += fmt::format("<rect class=\"bar\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"14\" fill=\"#d73027\"/>"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\">{:.3f} J default</text>\n",
                     left, yy, bar(d), left + bar(d) + 4, yy + 11, d);
    s += fmt::format("<rect class=\"bar\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"14\" fill=\"#1a9850\"/>"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\">{:.3f} J plan</text>\n",
                     left, yy + 17, bar(p), left + bar(p) + 4, yy + 28, p);
    yy += row;
  }
  return s + "</svg>\n";
}

std::string Cell(const json& j, const char* key, const char* format) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return "<td>-</td>";
  return "<td>" + fmt::format(fmt::runtime(format), it->get<double>()) + "</td>";
}

std::string SummaryTable(const json& plan) {
  std::string s =
      "<table id=\"summary\"><thead><tr><th>plan</th><th>time (us)</th><th>energy (J)</th><th>saving (%)</th>"
      "<th>slowdown (%)</th></tr></thead><tbody>\n";
  auto row = [&](const std::string& name, const json& j, const std::string& note = "") {
    if (!j.is_object()) return;
    s += "<tr><td>" + Escape(name) + (note.empty() ? "" : " <small>" + Escape(note) + "</small>") + "</td>" +
         Cell(j, "time_us", "{:.1f}") + Cell(j, "energy_j", "{:.3f}") + Cell(j, "saving_pct", "{:.2f}") +
         Cell(j, "slowdown_pct", "{:+.2f}") + "</tr>\n";
  };
  row("all at the default clock", plan["baseline"]);
  if (plan.contains("static_best")) {
    row(fmt::format("static {:.0f} MHz (best one clock)", Num(plan["static_best"], "clock_mhz")), plan["static_best"]);
  }
  if (plan.contains("baselines")) {
    const json& b = plan["baselines"];
    if (b.contains("pass_level")) row("pass-level (Perseus-style phases)", b["pass_level"]);
    if (b.contains("per_kernel_blind")) {
      row("per-kernel, no slack", b["per_kernel_blind"],
          Bool(b["per_kernel_blind"], "meets_target", true) ? "" : "misses the target");
    }
  }
  if (plan.contains("packings")) {
    for (const auto& [name, j] : plan["packings"].items()) row("packing: " + name, j);
  }
  const json& p = plan["plan"];
  row("EMO plan", p, fmt::format("{:g} packs, {:g} switches per iteration", Num(p, "packs"), Num(p, "switches")));
  s += "</tbody></table>\n<table id=\"confidence\"><tbody>\n";
  auto range = [&](const json& j, const char* key, const char* unit) {
    if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2) return std::string("-");
    return fmt::format("{:.2f} to {:.2f} {}", j[key][0].get<double>(), j[key][1].get<double>(), unit);
  };
  s += "<tr><th>timeline confidence</th><td>" + Escape(Str(plan, "confidence", "?")) + ": " +
       Escape(Str(plan, "confidence_note", "")) + "</td></tr>\n";
  s += "<tr><th>timeline range</th><td>" + range(plan, "timeline_range_us", "us") + "</td></tr>\n";
  s += "<tr><th>plan's saving over that range</th><td>" + range(p, "saving_range_pct", "%") + "</td></tr>\n";
  s += "<tr><th>plan's slowdown over that range</th><td>" + range(p, "slowdown_range_pct", "%") + "</td></tr>\n";
  if (p.contains("sensitivity") && p["sensitivity"].is_array() && !p["sensitivity"].empty()) {
    std::string cells;
    for (const auto& e : p["sensitivity"]) {
      cells += fmt::format("{}x{:g}: {:+.2f} %", cells.empty() ? "" : ", ", Num(e, "extra_time_factor"),
                           Num(e, "slowdown_pct"));
    }
    const bool fragile = p.contains("fragile_time") && p["fragile_time"].is_boolean() && p["fragile_time"].get<bool>();
    s += "<tr><th>slowdown with more extra time than modelled</th><td>" + Escape(cells) +
         (fragile ? " (fragile: the target breaks by more than the extra time adds)" : "") + "</td></tr>\n";
  }
  if (plan.contains("model")) {
    s += "<tr><th>energies</th><td>" + Escape(Str(plan["model"], "note", "")) + " (device model " +
         Escape(Str(plan["model"], "device", "")) + ")</td></tr>\n";
  }
  return s + "</tbody></table>\n";
}

constexpr std::string_view kStyle = R"(<style>
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1160px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; } h3 { font-size: 14px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
#confidence td { text-align: left; max-width: 900px; }
.charts { display: flex; gap: 28px; flex-wrap: wrap; align-items: flex-start; }
p.note { font-size: 12px; color: #555; max-width: 1100px; }
</style>
)";

std::string PlanSection(const json& plan) {
  const json& r = plan["report"];
  std::string s = fmt::format("<section class=\"plan\"><h2>{}{}</h2>\n", Escape(Str(plan, "trace", "trace")),
                              Num(plan, "rank", -1) >= 0 ? fmt::format(" (rank {:g})", Num(plan, "rank", -1)) : "");
  s += fmt::format("<p class=\"note\">Steady iteration {} on the {} timeline.</p>\n",
                   Escape(Str(plan, "steady_iteration", "?")), Escape(Str(plan, "timeline", "?")));
  s += SummaryTable(plan);
  s += "<h3>The steady iteration, per GPU: packs coloured by planned clock, the critical path, slack</h3>\n";
  s += ClockLegend(r);
  for (size_t g = 0; g < r["gpus"].size(); ++g) s += TimelineSvg(r, g);
  s += "<p class=\"note\">Slack is the analysis': how much later an op may end without delaying the end of the "
       "analysed window (so an op of the steady iteration's critical path may have some, when the next iteration "
       "does not wait for it). Packs and clocks are the plan's; hover a pack for its clock and span.</p>\n";
  s += "<div class=\"charts\"><div><h3>Time and energy: the frontier, the plan and every baseline</h3>\n";
  s += FrontierSvg(plan);
  s += "<p class=\"note\">Frontier: the pack graph solver's time-energy points; markers: each plan and baseline "
       "scored on the kernel graph.</p></div>\n";
  s += "<div><h3>GPU busy energy by kernel class (predicted)</h3>\n" + EnergySvg(r) +
       "<p class=\"note\">Per class, the device model's energy of its busy time in each pack, at the default clock "
       "and at the pack's planned clock; idle time and the overlap of streams are not in these bars.</p></div></div>\n";
  return s + "</section>\n";
}

bool NumberArray(const json& j, size_t n) {
  return j.is_array() && j.size() == n && std::all_of(j.begin(), j.end(), [](const json& x) { return x.is_number(); });
}

// What the drawing reads, checked before it draws: a saved JSON may have been edited.
Status CheckPlan(const json& p) {
  const std::string name = Str(p, "trace", "a plan");
  if (!p.is_object() || !p.contains("report") || !p["report"].is_object()) {
    return InvalidArgument(fmt::format(
        "{}: no \"report\" object in its plan (write the JSON with `emo optimize --report F.html --json F.json`)", name));
  }
  auto bad = [&](std::string_view what) { return InvalidArgument(fmt::format("{}: report: {}", name, what)); };
  for (const char* key : {"baseline", "plan"}) {
    if (!p.contains(key) || !p[key].is_object()) return bad(fmt::format("the plan has no \"{}\" object", key));
  }
  const json& r = p["report"];
  if (!r.contains("iteration_us") || !r["iteration_us"].is_number()) return bad("\"iteration_us\" is not a number");
  if (!r.contains("clocks_mhz") || !r["clocks_mhz"].is_object()) return bad("\"clocks_mhz\" is not an object");
  for (const char* key : {"gpus", "packs", "frontier"}) {
    if (!r.contains(key) || !r[key].is_array()) return bad(fmt::format("\"{}\" is not an array", key));
  }
  if (!r.contains("energy_by_class") || !r["energy_by_class"].is_object()) return bad("\"energy_by_class\" is not an object");
  for (const auto& g : r["gpus"]) {
    if (!g.is_object() || !g.contains("ops") || !g["ops"].is_object() || !g["ops"].contains("start_us") ||
        !g["ops"]["start_us"].is_array()) {
      return bad("a GPU without its \"ops\" arrays");
    }
    const size_t n = g["ops"]["start_us"].size();
    for (const char* key : {"start_us", "dur_us", "slack_us", "pack", "critical", "class"}) {
      if (!g["ops"].contains(key) || !NumberArray(g["ops"][key], n)) {
        return bad(fmt::format("ops.{} is not an array of {} numbers", key, n));
      }
    }
  }
  for (const auto& f : r["frontier"]) {
    if (!NumberArray(f, 2)) return bad("a frontier point is not [time_us, energy_j]");
  }
  for (const auto& pk : r["packs"]) {
    if (!pk.is_object()) return bad("a pack is not an object");
  }
  for (const auto& [cls, v] : r["energy_by_class"].items()) {
    if (!v.is_object()) return bad(fmt::format("energy_by_class.{} is not an object", cls));
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ReportHtml(const std::vector<json>& plans, const json& job) {
  if (plans.empty()) return InvalidArgument("no plan to report");
  for (const auto& p : plans) {
    Status st = CheckPlan(p);
    if (!st.ok()) return st;
  }
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>EMO plan report</title>\n";
  s += kStyle;
  s += "</head><body>\n<h1>EMO plan report</h1>\n";
  s += "<p class=\"note\">Every energy here is a prediction of the device model named below, not a measurement. "
       "Times are the replayed steady iteration.</p>\n";
  if (job.is_object() && !job.empty()) {
    s += fmt::format(
        "<p id=\"job\">Job of {} ranks: baseline {:.1f} us, planned {:.1f} us ({:+.2f} % against a target of "
        "{:.2f} %){}.</p>\n",
        plans.size(), Num(job, "baseline_us"), Num(job, "planned_us"), Num(job, "slowdown_pct"), Num(job, "target_pct"),
        Bool(job, "met", true) ? "" : ", target missed");
  }
  for (const auto& p : plans) s += PlanSection(p);
  return s + "</body></html>\n";
}

Result<std::string> ReportHtmlFromOptimizeJson(const json& out) {
  if (!out.is_object()) return InvalidArgument("not an `emo optimize --json` object");
  if (out.contains("traces")) {
    if (!out["traces"].is_array()) return InvalidArgument("\"traces\" is not an array");
    return ReportHtml(out["traces"].get<std::vector<json>>(), out.value("job", json()));
  }
  return ReportHtml({out}, out.value("job", json()));
}

}  // namespace emo::report
