// Tool calls through the official `openai` npm client against `nibble serve`
// on the built-in random-weight model: a round trip (tools + tool_choice
// required -> tool_calls -> a `tool` message with the result -> an answer),
// checked for shape; the streamed deltas reassembled (by hand and by the
// client's own stream helper) equal the whole answer with the same seed, the
// arguments in more than one fragment; a
// named tool_choice; an unknown function is the client's BadRequestError.
// usage: node openai_tools.mjs PORT API_KEY MODEL
import OpenAI from 'openai';

const [port, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 120000 });
let fails = 0, passes = 0;
const check = (name, cond, detail = '') => {
  if (cond) { passes++; console.log(`ok: ${name}`); } else { fails++; console.log(`FAIL: ${name} ${detail}`); }
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 16 },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'] } } },
  { type: 'function', function: { name: 'add', description: 'Adds two integers',
    parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } },
      required: ['a', 'b'], additionalProperties: false } } },
];
const names = tools.map((t) => t.function.name);
const validCall = (tc) => {
  if (!tc || typeof tc.id !== 'string' || !tc.id.startsWith('call_') || tc.type !== 'function') return false;
  if (!names.includes(tc.function.name) || typeof tc.function.arguments !== 'string') return false;
  const a = JSON.parse(tc.function.arguments);
  if (tc.function.name === 'add') return Number.isInteger(a.a) && Number.isInteger(a.b) && Object.keys(a).length === 2;
  return typeof a.city === 'string' && ['celsius', 'fahrenheit'].includes(a.unit);
};

try {
  const messages = [{ role: 'user', content: 'What is the weather in Lisbon?' }];
  const base = { model, messages, tools, tool_choice: 'required', seed: 42, temperature: 1, max_tokens: 120 };
  const r1 = await client.chat.completions.create(base);
  const m1 = r1.choices[0].message;
  check('required: finish_reason tool_calls, one valid call, content null',
        r1.choices[0].finish_reason === 'tool_calls' && m1.role === 'assistant' && m1.content === null &&
        m1.tool_calls.length === 1 && validCall(m1.tool_calls[0]), JSON.stringify(r1));

  // the round trip: the assistant's call and the tool's result go back
  const call = m1.tool_calls[0];
  const r2 = await client.chat.completions.create({
    model, tools, seed: 42, max_tokens: 24,
    messages: [...messages, m1, { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 19 }) }] });
  const c2 = r2.choices[0];
  check('round trip: the tool result is answered (content, or another call)',
        (typeof c2.message.content === 'string' && ['stop', 'length'].includes(c2.finish_reason)) ||
        (c2.finish_reason === 'tool_calls' && validCall(c2.message.tool_calls[0])), JSON.stringify(r2));

  // streaming: by hand
  const stream = await client.chat.completions.create({ ...base, stream: true });
  const acc = [];
  let finish = null, content = '', firstOk = true, laterOk = true;
  const frags = [];
  for await (const ch of stream) {
    const c = ch.choices[0];
    if (!c) continue;
    if (c.delta.content) content += c.delta.content;
    for (const t of c.delta.tool_calls ?? []) {
      if (!acc[t.index]) {
        firstOk = firstOk && typeof t.id === 'string' && t.type === 'function' && !!t.function.name &&
          t.function.arguments === '';
        acc[t.index] = { name: t.function.name, arguments: '' };
        frags[t.index] = 0;
      } else {
        // later deltas: only index and function.arguments (OpenAI's shape)
        laterOk = laterOk && t.id === undefined && t.type === undefined && t.function.name === undefined;
        if (t.function.arguments) frags[t.index]++;
      }
      acc[t.index].arguments += t.function.arguments ?? '';
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  const whole = m1.tool_calls.map((t) => ({ name: t.function.name, arguments: t.function.arguments }));
  check('stream: deltas reassemble to the whole answer (same seed)',
        JSON.stringify(acc) === JSON.stringify(whole), `${JSON.stringify(acc)} vs ${JSON.stringify(whole)}`);
  check('stream: first delta of a call has index, id, type, name, arguments ""; finish tool_calls; no content',
        firstOk && finish === 'tool_calls' && content === '', `${finish} ${JSON.stringify(content)}`);
  check('stream: the arguments arrive token by token (more than one fragment), later deltas only index + arguments',
        frags.length === 1 && frags[0] > 1 && laterOk, JSON.stringify(frags));

  // streaming: the client's own reassembly
  if (client.beta?.chat?.completions?.stream) {
    const s2 = client.beta.chat.completions.stream(base);
    const fin = await s2.finalChatCompletion();
    const m3 = fin.choices[0].message;
    check("stream helper's finalChatCompletion has the same call",
          fin.choices[0].finish_reason === 'tool_calls' && m3.tool_calls.length === 1 &&
          m3.tool_calls[0].function.name === call.function.name &&
          m3.tool_calls[0].function.arguments === call.function.arguments, JSON.stringify(fin));
  }

  const r4 = await client.chat.completions.create({ ...base, seed: 7,
    tool_choice: { type: 'function', function: { name: 'add' } } });
  check('named tool_choice: a call of add with integer arguments',
        r4.choices[0].message.tool_calls[0].function.name === 'add' && validCall(r4.choices[0].message.tool_calls[0]),
        JSON.stringify(r4));

  try {
    await client.chat.completions.create({ ...base, tool_choice: { type: 'function', function: { name: 'nope' } } });
    check('unknown function: BadRequestError', false, 'no error');
  } catch (e) {
    check('unknown function: BadRequestError naming tool_choice.function.name',
          e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'tool_choice.function.name',
          `${e.constructor.name} ${e.status} ${e.param}`);
  }
} catch (e) {
  fails++;
  console.log(`FAIL: unexpected error: ${e.stack ?? e}`);
}
console.log(`${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);
