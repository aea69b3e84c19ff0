"""The table scripts/benchmark.py prints: one row per system (training tokens/s, step time, MFU,
beam-search sentences/s), the ratios between them, then the scaling, analysis and memory stages and
the later ones, each line only where its stage ran."""

from qkvmt.bench.decoding import ENGINES


def table(r: dict) -> str:
    lines = [
        f"qkvmt benchmark · {r['device']} · CPU capability {r['hardware']['cpu_capability']} · {r['precision']} · "
        f"compile={r['compile']['train']}{_mode(r['compile'])} · float32 linear {_linear(r)} · {r['date']}",
    ]
    if "train" in r:
        lines += [
            f"{'system':<10}{'params':>11}{'train tgt tok/s':>17}{'src+tgt tok/s':>15}{'step ms':>9}{'MFU':>7}"
            f"{'beam sent/s':>13}",
            *_system_rows(r),
            *_ratio_lines(r["train"], r["decode"]),
            *_scaling_lines(r["scaling"]),
        ]
    a = r.get("analysis")
    if a:
        lines.append(
            f"  analysis of one sentence ({a['sentences']} pairs, median): forced pass with value norms, "
            f"token scores and ALTI+ {a['forced_pass_ms']:.0f} ms, ALTI+ alone {a['alti_ms']:.0f} ms; "
            f"an intervention (keys swapped, beam search again, {a['intervene_words']:.0f} words) "
            f"{a['intervene_ms']:.0f} ms"
        )
    if r.get("memory"):
        lines.append(memory_line(r["memory"]))
    if r.get("imported"):
        lines += imported_lines(r["imported"])
    if r.get("serve"):
        lines.append(serve_line(r["serve"]))
    if r.get("corpus"):
        lines.append(corpus_line(r["corpus"]))
    if r.get("hooks"):
        lines += hooks_lines(r["hooks"])
    return "\n".join(lines)


def hooks_lines(h: dict) -> list[str]:
    """The hooks API's figures, each beside its goal."""
    c, s, p, goal = h["cache"], h["search"], h["patch"], h["goals"]
    lines = [
        f"hooks: run_with_cache of all {c['names']} names, one {c['words']}-word sentence, {c['seconds']:.2f} s "
        f"(goal <= {goal['cache_s']:g} s)",
        f"  beam {s['beam_size']}, {s['sentences']} sentences, {s['plain_s']:.2f} s without hooks; with a hook "
        "returning None at "
        + ", ".join(f"{name} {x['vs_plain']:.2f}x" for name, x in s["hooked"].items())
        + f" (goal <= {goal['hooked_vs_plain']:g}x)",
    ]
    if "skipped" in p:
        return [*lines, f"  patch_study: left out, {p['skipped']}"]
    speedup = "-" if p["patching_vs_attribution"] is None else f"{p['patching_vs_attribution']:.1f}x"
    return [
        *lines,
        f"  patch_study of {p['pairs']} pairs ({p['passes']:,} patched passes): {p['seconds']['total']:.0f} s "
        f"(goal <= {goal['patch_s']:g} s); patching / attribution {speedup} (goal >= "
        f"{goal['patching_vs_attribution']:g}x), correlation {fmt(p['correlation'], 3)}",
    ]


def corpus_line(c: dict) -> str:
    """The synthetic WMT-sized corpus: each step's seconds and its process's peak resident set."""
    if "error" in c:
        return f"corpus of {c['pairs']:,} pairs: {c['error']}"
    e, r = c["encode"], c["resume"]
    return (
        f"corpus of {c['pairs']:,} pairs ({c['generate']['text_mb']:.0f} MB of text): tokenizer "
        f"{c['tokenizer']['seconds']:.0f} s (peak {c['tokenizer']['peak_mb']:,.0f} MB), encoding and caching "
        f"{e['seconds']:.0f} s, {e['pairs_per_s']:,.0f} pairs/s (peak {e['peak_mb']:,.0f} MB), a resumed run "
        f"{r['seconds']:.0f} s and its first batch {r['first_batch_s'] * 1000:.0f} ms (peak {r['peak_mb']:,.0f} MB)"
    )


def serve_line(s: dict) -> str:
    """qkvmt serve under concurrent clients against translate over the same sentences."""
    wait, joining = s["batching"], s.get("continuous", False)
    how = "requests joining a running search" if joining else "a call"
    return (
        f"qkvmt serve of {s['model']}, {s['clients']} clients, {s['per_request']} sentences a request, "
        f"beam {s['beam_size']}, {how} waiting {wait['gap_ms']:g} ms for each next request (at most "
        f"{wait['max_wait_ms']:g}): {s['served_sent_s']:.1f} sentences/s, translate alone {s['direct_sent_s']:.1f} "
        f"({s['served_vs_direct']:.0%}), in calls of {s['in_flight']} sentences {s['in_flight_sent_s']:.1f} "
        f"({s['served_vs_in_flight']:.0%}); {s['calls_per_run']:.1f} {'searches' if joining else 'calls'} for "
        f"{s['requests_per_run']} requests; {s['identical']} of {s['sentences']} identical"
    )


def imported_lines(i: dict) -> list[str]:
    """The imported Marian model: load, memory, beam search against generate, the explorer."""
    s, ld, d, e = i["shape"], i["load"], i["decode"], i["explorer"]
    return [
        f"imported Marian (d_model {s['d_model']}, {s['layers']}+{s['layers']} layers, {s['heads']} heads, "
        f"{s['vocab_size']:,}-token vocabulary, {ld['weights_mib']:.0f} MiB of weights):",
        f"  load {ld['load_s']:.2f} s in a fresh process ({ld['load_after_imports_s']:.2f} s after the imports); "
        f"memory at its peak +{ld['peak_growth_mib']:.0f} MiB, {ld['peak_vs_weights']:.2f}x the weights",
        f"  beam {d['settings']['beam_size']}, {d['sentences']} sentences: ours {d['ours_s']:.2f} s, generate "
        f"{d['hf_s']:.2f} s, ours {d['ours_vs_hf']:.2f}x as fast; {d['identical']} of {d['sentences']} identical",
        _imported_ct2_line(i["ctranslate2"], d["sentences"]),
        f"  explorer, {len(e['sentences'])} sentences (median, largest): first view {e['first_view_s_median']:.2f} s, "
        f"{e['first_view_s_max']:.2f} s; an intervention {e['intervention_s_median']:.2f} s, "
        f"{e['intervention_s_max']:.2f} s; layers panel {e['lens_s_median']:.2f} s, {e['lens_s_max']:.2f} s",
        "  signals computed when chosen: " + ", ".join(f"{k} {v:.2f} s" for k, v in e["signal_s"].items()),
    ]


def _imported_ct2_line(c: dict, sentences: int) -> str:
    """The imported model exported to CTranslate2 float32 against ours, both with its stopping rule."""
    if "ctranslate2_missing" in c:
        return f"  CTranslate2 float32: missing: {c['ctranslate2_missing']}"
    return (
        f"  CTranslate2 {c['ctranslate2_version']} float32, both with early_stopping=true: ours {c['ours_s']:.2f} s, "
        f"CTranslate2 {c['ct2_float32_s']:.2f} s, ours {c['ours_vs_ct2_float32']:.2f}x as fast; "
        f"{c['identical']} of {sentences} identical"
    )


def _system_rows(r: dict) -> list[str]:
    """One row per system: parameters, training speed, MFU, beam-search sentences/s."""
    t, d = r["train"], r["decode"]
    lines = []
    for name in ("ours", "ours_align", "torch", "hf"):
        if name == "ours_align" and name not in t["systems"]:
            continue  # only when asked for
        row = t["systems"].get(name)
        sent = d.get(f"{name}_sent_s")  # nn.Transformer has no decoding row
        if row is None:
            lines.append(f"{name:<10}{'missing: ' + t.get('hf_missing', 'not run'):>50}")
            continue
        mfu = f"{100 * row['mfu']:.1f}%" if row["mfu"] is not None else "-"
        lines.append(
            f"{name:<10}{r['params'][name]:>11,}{row['tgt_tok_s']:>17,.0f}{row['tok_s']:>15,.0f}"
            f"{row['step_ms']:>9.1f}{mfu:>7}{fmt(sent):>13}"
        )
    return lines


def _ratio_lines(t: dict, d: dict) -> list[str]:
    """Uncached and CTranslate2 decoding, the ratios between systems, the time to build a batch."""
    lines = []
    if "ours_align_vs_ours" in t:
        lines.append(f"train ours_align/ours {fmt(t['ours_align_vs_ours'], 3)}")
    lines.append(f"{'uncached':<10}{'':>59}{fmt(d['uncached_sent_s']):>13}")
    for name, why in d.get("engines_missing", {}).items():
        lines.append(f"{name:<14}  missing: {why}")
    for name in ENGINES:
        if d.get(f"{name}_sent_s") is not None:
            lines.append(f"{name:<14}{'':>55}{fmt(d[name + '_sent_s']):>13}   /ours {fmt(d[name + '_vs_ours'], 2)}")
    for key in d:
        if key.startswith("ct2_") and key.endswith("_sent_s"):
            kind = key[len("ct2_") : -len("_sent_s")]
            lines.append(
                f"{'ct2 ' + kind:<14}{'':>55}{fmt(d[key]):>13}   ours/ct2 {fmt(d['ours_vs_ct2_' + kind], 2)}"
                f"  best of ours/ct2 {fmt(d.get('best_vs_ct2_' + kind), 2)}"
            )
    lines.append(
        f"train ours/torch {fmt(t['ours_vs_torch'], 2)}  ours/hf {fmt(t['ours_vs_hf'], 2)}   "
        f"decode ours/hf {fmt(d['ours_vs_hf'], 2)}  cached/uncached {fmt(d['ours_vs_uncached'], 2)}"
    )
    if t.get("batch_ms") is not None:
        lines.append(
            f"  a training batch of at most {t['max_tokens']:,} tokens, built in the training process: "
            f"{t['batch_ms']:.2f} ms (median)"
        )
    return lines


def _scaling_lines(scaling: dict) -> list[str]:
    """Time per token at each output length; time and memory to tokenize each corpus size."""
    lines = []
    for row in scaling["decode"]:
        lines.append(
            f"  length {row['length']:>4}: cached {row['cached_ms_per_token']:.3f} ms/token"
            + (f", uncached {row['uncached_ms_per_token']:.3f}" if "uncached_ms_per_token" in row else "")
        )
    for row in scaling["tokenize"]:
        if "error" in row:
            lines.append(f"  tokenize {row['pairs']:,} pairs: {row['error']}")
        else:
            lines.append(
                f"  tokenize {row['pairs']:,} pairs: {row['seconds']:.1f} s, peak +{row['peak_extra_mb']:.0f} MB, "
                f"ids on disk {row['cache_mb']:.0f} MB"
            )
    return lines


def memory_line(m: dict) -> str:
    """The host-memory stage: train.py's peak per process, where the largest was set, and growth."""
    if "error" in m:
        return f"  host memory of {m['experiment']}: {m['error']}"
    per_process = ", ".join(f"{mb:,.0f}" for mb in m["peak_rss_mb_per_process"])
    return (
        f"  host memory of {m['experiment']} (qkvmt train, {m['processes']} process(es), {m['precision']}, "
        f"{m['threads']} thread(s) each, {m['steps']} steps): peak RSS {per_process} MB a process, "
        f"set during {m['peak_set_in']}; growth {fmt(m['growth_mb_per_1k_steps'])} MB per 1,000 steps"
    )


def fmt(x, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _mode(compile: dict) -> str:
    mode = compile.get("mode", "default")  # records made before compile_mode have none
    return "" if mode == "default" else f" ({mode})"


def _linear(r: dict) -> str:
    """What float32 products without gradients ran on (results before the choice existed: torch's)."""
    return r.get("float32_linear", {}).get("name", "torch")
