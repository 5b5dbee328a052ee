"""The reference miner (`af miner serve`) driven by the official OpenAI Python SDK, for
every call a client makes: chat completions plain and streamed, the legacy completions,
models list and retrieve, and the error an unknown model gets. Run by .ci/run.

Usage: openai-check.py BASE_URL MODEL
"""
import sys

import openai

base_url, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
PASSED = []


def check(condition, what):
    if not condition:
        sys.exit(f"FAIL: {what}")
    PASSED.append(what)
    print(f"ok   {what}")


messages = [{"role": "system", "content": "You are a careful calculator. Answer with the exact integer only."},
            {"role": "user", "content": "What is 12345678 × 87654321?\nGive the exact product as a plain integer on the last line, as `Answer: <number>`."}]
reply = client.chat.completions.create(model=model, messages=messages)
check(reply.choices[0].message.content.strip().endswith(str(12345678 * 87654321)), "chat completion answers")
check(reply.usage is not None and reply.usage.total_tokens > 0, "chat completion has usage")
chunks = list(client.chat.completions.create(model=model, messages=messages, stream=True))
streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
check(len(chunks) >= 2 and streamed == reply.choices[0].message.content, "streamed chat completion equals the plain one")
legacy = client.completions.create(model=model, prompt="hello")
check(isinstance(legacy.choices[0].text, str), "legacy completion")
check([m.id for m in client.models.list()] == [model], "models list")
check(client.models.retrieve(model).id == model, "models retrieve")
try:
    client.chat.completions.create(model="no-such-model", messages=messages)
    check(False, "an unknown model is refused")
except openai.NotFoundError as error:
    check(error.status_code == 404 and error.code == "model_not_found", "an unknown model is a 404 model_not_found")
print(f"openai-check: {len(PASSED)} passed, 0 failed")
