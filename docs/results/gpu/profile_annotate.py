import cProfile, pstats, sys, time, tempfile, os
from pathlib import Path
sys.path.insert(0, "scripts"); sys.path.insert(0, ".")
os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from bench_annotate import load_passages, random_model
from udcg.annotate.estimators import abstention_probs
from udcg.annotate.prompt import reader_chat
from udcg.llm.hf import HFBackend
dev = sys.argv[1]; n = int(sys.argv[2]); dtype = sys.argv[3] if len(sys.argv) > 3 else "bfloat16"
rows = load_passages(Path(".devcarry/popqa.jsonl"), n)
chats = [reader_chat(q, [t]) for q, t, _ in rows]
tmp = tempfile.mkdtemp()
b = HFBackend(random_model(".devcarry/qwen2.5-coder-0.5b", dtype, Path(tmp)), device=dev, dtype=dtype)
print("attn impl", b.model.config._attn_implementation)
abstention_probs(b, chats[:256])
if dev.startswith("cuda"): torch.cuda.synchronize()
t = time.perf_counter(); abstention_probs(b, chats[:256]); print("one chunk of 256:", time.perf_counter() - t)
pr = cProfile.Profile(); pr.enable()
for s in range(0, n, 256): abstention_probs(b, chats[s:s + 256])
pr.disable()
pstats.Stats(pr).sort_stats("cumulative").print_stats(35)
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
from torch.profiler import profile, ProfilerActivity
acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.startswith("cuda") else [])
with profile(activities=acts) as p:
    abstention_probs(b, chats[:256])
print(p.key_averages().table(sort_by="cuda_time_total" if dev.startswith("cuda") else "cpu_time_total", row_limit=25))
