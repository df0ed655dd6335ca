# The conversations make_golden.py renders with every chat template.
"""Each conversation is a dict: messages, and optionally tools, add_generation_prompt (default
True) and kwargs (extra template variables such as enable_thinking). Every template gets every
conversation; one a template rejects (raise_exception) is stored with the expected error."""

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city. Données météo «en direct».",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["city"],
        },
        "return": {"type": "string"},
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "top_k": {"type": "number", "default": 0.5}},
            "required": ["query"],
        },
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

SYS = {"role": "system", "content": "You are a helpful assistant."}


def user(text):
    return {"role": "user", "content": text}


def assistant(text, **extra):
    return {"role": "assistant", "content": text, **extra}


def call(name, arguments, call_id, as_string=True):
    import json

    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments) if as_string else arguments},
    }


def tool_result(text, call_id, name=None):
    message = {"role": "tool", "content": text, "tool_call_id": call_id}
    if name:
        message["name"] = name
    return message


WEATHER_ARGS = {"city": "Paris", "unit": "celsius"}


def tool_turn(as_string, content=None, reasoning=None):
    message = assistant(content, tool_calls=[call("get_weather", WEATHER_ARGS, "call00001", as_string)])
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return message


def conversations():
    c = []

    def add(messages, **options):
        c.append({"messages": messages, **options})

    # Plain chats, with and without a system message and a generation prompt.
    add([user("Hello!")])
    add([user("Hello!")], add_generation_prompt=False)
    add([SYS, user("What is 2 + 2?")])
    add([SYS, user("What is 2 + 2?")], add_generation_prompt=False)
    add([user("Hi"), assistant("Hello! How can I help?"), user("Tell me a joke.")])
    add([SYS, user("Hi"), assistant("Hello!"), user("Bye"), assistant("Goodbye!")], add_generation_prompt=False)
    add([SYS, user("Hi"), assistant("Hello!"), user("Bye"), assistant("Goodbye!")])
    turns = []
    for i in range(6):
        turns += [user(f"Question {i}?"), assistant(f"Answer {i}.")]
    add(turns + [user("Last question?")])
    add(turns, add_generation_prompt=False)
    add([user("Translate 'chat' to French."), assistant("« chat »"), user("Merci !")])
    add([user("Write JSON"), assistant('{"a": [1, 2], "b": "c"}'), user("Now YAML")],
        kwargs={"enable_thinking": True})
    add([user("Count to three."), assistant("1\n2\n3")], add_generation_prompt=False)
    add([user("Summarize: " + "lorem ipsum " * 40)])
    add([user("Only a user message")], kwargs={"enable_thinking": False})
    add([SYS, user("Think about this.")], kwargs={"enable_thinking": True})
    add([SYS, user("Quick answer please.")], kwargs={"enable_thinking": False})
    # Content edge cases: whitespace, unicode, quoting, template-like text.
    add([user("   padded with spaces and newlines \n\n"), assistant("\n  answer with whitespace  \n"), user("ok")])
    add([SYS, user("Unicode: naïve café, 中文, emoji 😀🚀, RTL שלום, combining é")])
    add([user('Quotes \' and " and backslash \\ and braces {{ not a tag }} {% nor this %}')])
    add([user("Line one\nLine two\n\nLine four\ttabbed")], add_generation_prompt=False)
    add([{"role": "system", "content": "Multi\nline\nsystem"}, user("x")])
    add([user("")])
    add([user("<tool_response>\nnot really a tool\n</tool_response>")])
    # Reasoning content, as a field and inline.
    add([user("2+2?"), assistant("4", reasoning_content="2 plus 2 is 4."), user("3+3?")])
    add([user("2+2?"), assistant("4", reasoning_content="2 plus 2 is 4.")], add_generation_prompt=False)
    add([user("2+2?"), assistant("<think>\nLet me add.\n</think>\n\nIt is 4.")], add_generation_prompt=False)
    add([user("2+2?"), assistant("<think>\nLet me add.\n</think>\n\nIt is 4."), user("And 3+3?")])
    add([user("q"), assistant("a", thinking="via the thinking field")], add_generation_prompt=False)
    add([user("q"), assistant("a", reasoning="via the reasoning field", reasoning_content=None)], add_generation_prompt=False)
    # Null fields are dropped before rendering; extra fields are kept.
    add([user("Hi"), assistant("Hello", tool_calls=None, name="bot"), user("Again")])
    # Tools: definitions, calls (arguments as JSON strings and as objects), results.
    add([user("What's the weather in Paris?")], tools=TOOLS)
    add([SYS, user("What's the weather in Paris?")], tools=TOOLS)
    add([SYS, user("Weather?")], tools=[WEATHER_TOOL], add_generation_prompt=False)
    add([user("Weather in Paris?"), tool_turn(True), tool_result('{"temperature": 21, "sky": "clear"}', "call00001", "get_weather")], tools=TOOLS)
    add([SYS, user("Weather in Paris?"), tool_turn(False), tool_result("21 degrees", "call00001"),
         assistant("It is 21 degrees in Paris.")], tools=TOOLS, add_generation_prompt=False)
    add([user("Weather in Paris?"), tool_turn(True, content=""), tool_result("sunny", "call00001"),
         assistant("Sunny."), user("Thanks! And search for umbrellas.")], tools=TOOLS)
    add([user("Weather?"), tool_turn(False, content="Let me check."), tool_result("rain", "call00001")], tools=TOOLS)
    two_calls = assistant(None, tool_calls=[
        call("get_weather", {"city": "Paris"}, "call00001"),
        call("search", {"query": "umbrella shops", "top_k": 3}, "call00002")])
    add([user("Weather and umbrellas?"), two_calls, tool_result("rain", "call00001"),
         tool_result("3 shops found", "call00002")], tools=TOOLS)
    add([user("Weather and umbrellas?"), two_calls, tool_result("rain", "call00001"),
         tool_result("3 shops found", "call00002"), assistant("Take an umbrella.")], tools=TOOLS,
        add_generation_prompt=False)
    two_calls_empty = dict(two_calls, content="")
    add([SYS, user("Weather and umbrellas?"), two_calls_empty, tool_result("rain", "call00001"),
         tool_result("3 shops found", "call00002")], tools=TOOLS)
    add([user("Weather and umbrellas?"), two_calls_empty, tool_result("rain", "call00001"),
         tool_result("3 shops found", "call00002"), assistant("Take an umbrella."), user("Thanks")],
        tools=TOOLS, kwargs={"enable_thinking": False})
    add([user("Weather?"), tool_turn(False, content="", reasoning="Use the tool."),
         tool_result("cloudy", "call00001"), assistant("Cloudy.", reasoning_content="Report it.")],
        tools=TOOLS, add_generation_prompt=False)
    add([user("Weather?"), tool_turn(True, reasoning="I should call the weather tool."),
         tool_result("cloudy", "call00001"), assistant("Cloudy.", reasoning_content="Summarize.")],
        tools=TOOLS, add_generation_prompt=False)
    add([user("Weather?"), tool_turn(True, reasoning="Call the tool."), tool_result("cloudy", "call00001")],
        tools=TOOLS, kwargs={"enable_thinking": False})
    add([user("Weather?"), tool_turn(True), tool_result("cloudy", "call00001")])  # no tools given
    add([user("Weather?"), tool_turn(True), {"role": "ipython", "content": {"temp": 21}}], tools=TOOLS)
    add([user("Weather?"), tool_turn(True), tool_result({"temp": 21, "ok": True}, "call00001")], tools=TOOLS)
    # Llama-3.1 style variables.
    add([SYS, user("Weather?")], tools=TOOLS, kwargs={"tools_in_user_message": False})
    add([user("Search the web")], kwargs={"builtin_tools": ["brave_search", "wolfram_alpha"]})
    add([SYS, user("What day is it?")], kwargs={"date_string": "01 Jan 2030"})
    add([user("Run it"), assistant(None, tool_calls=[call("brave_search", {"query": "x"}, "call00003", False)]),
         {"role": "ipython", "content": "result"}], kwargs={"builtin_tools": ["brave_search"]})
    # Content as a list of blocks (multimodal-style).
    add([{"role": "system", "content": [{"type": "text", "text": "Block system."}]},
         {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  Describe this image.  "}]}])
    # Conversations some templates reject.
    add([assistant("I speak first."), user("Hi")])
    add([user("one"), user("two")])
    add([SYS, user("Hi"), {"role": "system", "content": "Mid-conversation system."}, user("Again")])
    add([{"role": "critic", "content": "Unknown role."}, user("Hi")])
    add([user("Two calls"), assistant(None, tool_calls=[call("a", {}, "call00004"), call("b", {}, "call00005")])],
        tools=TOOLS, add_generation_prompt=False)
    add([user("Bad id"), assistant(None, tool_calls=[call("get_weather", WEATHER_ARGS, "short")]),
         tool_result("x", "short")], tools=TOOLS)
    return c
