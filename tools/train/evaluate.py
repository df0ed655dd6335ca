# Evaluation: greedy agreement of draft and target, and a simulation of greedy (T=0) draft-model
# speculative decoding that reports the mean acceptance length (tokens per target forward, bonus included).
import torch


@torch.no_grad()
def last_logits(model, buf, positions, suppress: list):
    """Logits at `positions` ([B, P] indices into buf's columns), float32, suppressed ids set to -inf."""
    width = int(positions.max()) + 1
    hidden = model.hidden(buf[:, :width])
    rows = torch.arange(buf.shape[0], device=buf.device)[:, None]
    logits = model.lm_head(hidden[rows, positions]).float()
    if suppress:
        logits[..., suppress] = float("-inf")
    return logits


def right_padded(prompts: list, extra: int, device):
    lens = torch.tensor([len(p) for p in prompts], device=device)
    buf = torch.zeros(len(prompts), int(lens.max()) + extra, dtype=torch.long, device=device)
    for i, p in enumerate(prompts):
        buf[i, :len(p)] = torch.tensor(p, device=device)
    return buf, lens


@torch.no_grad()
def speculative_greedy(target, draft, prompts: list, k: int, new_tokens: int, suppress: list) -> dict:
    """Right-padded batch (causal attention makes padding after a row's end harmless). Per round the draft
    proposes k greedy tokens, the target scores all k+1 positions in one forward, the longest matching
    prefix plus the target's own next token is kept."""
    device = next(target.parameters()).device
    buf, lens = right_padded(prompts, new_tokens + 2 * k + 2, device)  # a finished row may overshoot by k
    rows = torch.arange(len(prompts), device=device)
    generated = torch.zeros_like(lens)
    rounds = torch.zeros_like(lens)
    start = lens.clone()
    while bool((generated < new_tokens).any()):
        active = generated < new_tokens
        pos = lens.clone()
        for _ in range(k):
            nxt = last_logits(draft, buf, (pos - 1)[:, None], suppress)[:, 0].argmax(-1)
            buf[rows, pos] = nxt
            pos += 1
        verify = (lens - 1)[:, None] + torch.arange(k + 1, device=device)
        t_tok = last_logits(target, buf, verify, suppress).argmax(-1)
        d_tok = buf[rows[:, None], lens[:, None] + torch.arange(k, device=device)]
        n_ok = (d_tok == t_tok[:, :k]).long().cumprod(1).sum(1)
        buf[rows, lens + n_ok] = t_tok[rows, n_ok]
        step = torch.where(active, n_ok + 1, torch.zeros_like(n_ok))
        generated += step
        rounds += active.long()
        lens += step
    outputs = [buf[i, start[i]:start[i] + new_tokens].tolist() for i in range(len(prompts))]
    return {"generated": generated.sum().item(), "rounds": rounds.sum().item(),
            "per_prompt": (generated.float() / rounds.float()).tolist(), "outputs": outputs}


@torch.no_grad()
def greedy(model, prompts: list, new_tokens: int, suppress: list) -> list:
    device = next(model.parameters()).device
    buf, lens = right_padded(prompts, new_tokens + 1, device)
    rows = torch.arange(len(prompts), device=device)
    start = lens.clone()
    for _ in range(new_tokens):
        buf[rows, lens] = last_logits(model, buf, (lens - 1)[:, None], suppress)[:, 0].argmax(-1)
        lens += 1
    return [buf[i, start[i]:start[i] + new_tokens].tolist() for i in range(len(prompts))]


@torch.no_grad()
def greedy_agreement(target, draft, stream, seq: int, windows: int) -> float:
    """Teacher-forced: fraction of positions where draft argmax == target argmax on held-out text."""
    idx = torch.arange(windows, device=stream.device)[:, None] * seq + torch.arange(seq, device=stream.device)
    ids = stream[idx].long()
    return (target(ids).argmax(-1) == draft(ids).argmax(-1)).float().mean().item()


def expected_length(alpha: float, k: int) -> float:
    """Mean tokens per target forward if each draft token matched independently with probability alpha."""
    return sum(alpha ** i for i in range(k + 1))


def run_acceptance(target, draft, prompts: list, cfg: dict, suppress: list, batch: int) -> dict:
    """Acceptance length over prompts (batched), plus, for the first cfg['check_plain'] prompts, whether the
    speculative outputs equal plain greedy decoding with the target."""
    generated, rounds, same, checked, per_prompt = 0, 0, 0, 0, []
    for i in range(0, len(prompts), batch):
        chunk = prompts[i:i + batch]
        spec = speculative_greedy(target, draft, chunk, cfg["k"], cfg["new_tokens"], suppress)
        n_check = max(0, min(len(chunk), cfg["check_plain"] - i))
        if n_check:
            plain = greedy(target, chunk[:n_check], cfg["new_tokens"], suppress)
            same += sum(a == b for a, b in zip(spec["outputs"], plain))
            checked += n_check
        generated += spec["generated"]
        rounds += spec["rounds"]
        per_prompt += spec["per_prompt"]
    mean_len = sum(per_prompt) / len(per_prompt)
    return {"prompts": len(prompts), "k": cfg["k"], "new_tokens": cfg["new_tokens"],
            "acceptance_length": generated / rounds, "mean_acceptance_length_per_prompt": mean_len,
            "min_acceptance_length": min(per_prompt), "max_acceptance_length": max(per_prompt),
            "plain_greedy_checked": checked, "outputs_equal_plain_greedy": same}
