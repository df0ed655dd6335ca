# Training loops: target pre-training (cross-entropy) and draft distillation from the target (KL + CE),
# each stopped by a step count or a wall-clock deadline, with a cosine schedule and resumable checkpoints.
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from common import log
from model import Qwen3LM


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def sample_batch(stream, batch: int, seq: int, gen):
    """Random windows of seq+1 tokens from the uint16 stream on the GPU -> (inputs, next tokens)."""
    starts = torch.randint(0, stream.numel() - seq - 1, (batch,), generator=gen, device=stream.device)
    chunk = stream[starts[:, None] + torch.arange(seq + 1, device=stream.device)].long()
    return chunk[:, :-1], chunk[:, 1:]


def lr_at(step: int, total: int, tcfg: dict) -> float:
    peak, warm = tcfg["lr"], tcfg["warmup_steps"]
    if step < warm:
        return peak * (step + 1) / warm
    progress = min(1.0, (step - warm) / max(1, total - warm))
    floor = peak * tcfg["min_lr_ratio"]
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(model, tcfg: dict):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": tcfg["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=tcfg["lr"], betas=tuple(tcfg["betas"]), eps=1e-8,
                             fused=model.lm_head.weight.is_cuda)


def ce_loss(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))


def distill_loss(draft, target, x, y, dcfg: dict):
    """kl_weight * T^2 * KL(target_T || draft_T) + ce_weight * CE(draft, labels), labels = teacher argmax or data."""
    with torch.no_grad():
        t_logits = target(x).float()
    d_logits = draft(x).float()
    temp = dcfg["temperature"]
    t_logp = F.log_softmax(t_logits / temp, dim=-1)
    d_logp = F.log_softmax(d_logits / temp, dim=-1)
    kl = (t_logp.exp() * (t_logp - d_logp)).sum(-1).mean() * temp * temp
    labels = t_logits.argmax(-1) if dcfg["hard_labels"] == "teacher" else y
    ce = F.cross_entropy(d_logits.view(-1, d_logits.shape[-1]), labels.reshape(-1))
    return dcfg["kl_weight"] * kl + dcfg["ce_weight"] * ce


def save_checkpoint(path: Path, model, opt, state: dict):
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, tmp)
    tmp.replace(path)


def train_phase(name: str, model: Qwen3LM, loss_fn, stream, tcfg: dict, deadline: float, ckpt: Path,
                resume: bool, seed: int) -> dict:
    """Runs optimizer steps until tcfg['max_steps'] (if set), the step count estimated to fit the deadline,
    or the deadline itself. Returns a summary dict; the final weights stay in `model`."""
    device = stream.device
    opt = make_optimizer(model, tcfg)
    gen = torch.Generator(device=device).manual_seed(seed)
    state = {"step": 0, "total_steps": tcfg.get("max_steps"), "tokens": 0, "train_seconds": 0.0, "done": False}
    if resume and ckpt.exists():
        saved = torch.load(ckpt, map_location=device, weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        state = saved["state"]
        gen.manual_seed(seed + state["step"])  # a resumed run continues on a fresh, still seeded data order
        log(f"{name}: resumed at step {state['step']} (done={state['done']})")
        if state["done"]:
            return state
    step_fn = torch.compile(loss_fn) if tcfg["compile"] else loss_fn
    batch, seq = tcfg["batch_size"], tcfg["seq_len"]
    params = [p for p in model.parameters() if p.requires_grad]
    t0, last_ckpt, measure_start = time.time(), time.time(), None
    model.train()
    while True:
        step = state["step"]
        if state["total_steps"] is not None and step >= state["total_steps"]:
            break
        if time.time() >= deadline:
            log(f"{name}: deadline reached at step {step}")
            break
        lr = lr_at(step, state["total_steps"] or 10 ** 9, tcfg)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = sample_batch(stream, batch, seq, gen)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, tcfg["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        state["step"] += 1
        state["tokens"] += batch * seq
        s = state["step"]
        if s == tcfg["measure_from_step"]:
            sync(device)
            measure_start = time.time()
        if s == tcfg["measure_to_step"] and state["total_steps"] is None:
            sync(device)
            per_step = (time.time() - measure_start) / (tcfg["measure_to_step"] - tcfg["measure_from_step"])
            left = deadline - time.time()
            state["total_steps"] = s + int(tcfg["budget_safety"] * left / per_step)
            log(f"{name}: {per_step * 1000:.1f} ms/step, {batch * seq / per_step / 1e3:.0f}k tok/s "
                f"-> schedule of {state['total_steps']} steps")
        if s % tcfg["log_every"] == 0 or s == 1:
            log(f"{name}: step {s}/{state['total_steps']} loss {loss.item():.4f} lr {lr:.2e} gnorm {gnorm.item():.2f}")
        if time.time() - last_ckpt > tcfg["checkpoint_every_s"]:
            state["train_seconds"] += time.time() - t0
            t0 = last_ckpt = time.time()
            save_checkpoint(ckpt, model, opt, state)
    sync(device)
    state["train_seconds"] += time.time() - t0
    state["done"] = True
    state["final_train_loss"] = float(loss.item()) if state["step"] else None
    save_checkpoint(ckpt, model, opt, state)
    log(f"{name}: finished {state['step']} steps, {state['tokens'] / 1e6:.1f}M tokens in {state['train_seconds']:.0f}s")
    return state


@torch.no_grad()
def eval_loss(model, stream, seq: int, max_windows: int, batch: int) -> dict:
    """Mean next-token cross-entropy over the first non-overlapping windows of the stream."""
    model.eval()
    n = min(max_windows, (stream.numel() - 1) // seq)
    total, count = 0.0, 0
    for start in range(0, n, batch):
        idx = torch.arange(start, min(n, start + batch), device=stream.device)[:, None] * seq
        chunk = stream[idx + torch.arange(seq + 1, device=stream.device)].long()
        with torch.autocast(stream.device.type, dtype=torch.bfloat16):
            logits = model(chunk[:, :-1])
        total += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1),
                                 reduction="sum").item()
        count += chunk[:, 1:].numel()
    loss = total / count
    return {"loss": loss, "perplexity": math.exp(loss), "tokens": count}
