// The official `openai` npm client against `nibble serve`: chat and
// completions, streaming and not, the error path (the client's own
// APIError subclasses), and the model list.
// usage: node openai_client.mjs PORT API_KEY MODEL
import OpenAI from 'openai';

const [port, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
let fails = 0, passes = 0;
const check = (name, cond, detail = '') => {
  if (cond) { passes++; console.log(`ok: ${name}`); } else { fails++; console.log(`FAIL: ${name} ${detail}`); }
};

try {
  const models = await client.models.list();
  check('models.list names the served model', models.data.length === 1 && models.data[0].id === model,
        JSON.stringify(models.data));

  const chat = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }],
    max_tokens: 8, temperature: 0 });
  check('chat: assistant message, finish_reason, usage',
        chat.object === 'chat.completion' && chat.choices[0].message.role === 'assistant' &&
        typeof chat.choices[0].message.content === 'string' &&
        ['stop', 'length'].includes(chat.choices[0].finish_reason) &&
        chat.usage.completion_tokens >= 1 && chat.usage.completion_tokens <= 8 &&
        chat.usage.total_tokens === chat.usage.prompt_tokens + chat.usage.completion_tokens,
        JSON.stringify(chat));

  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }],
    max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = '', role = null, finish = null, usage = null, n = 0;
  for await (const ch of stream) {
    n++;
    if (ch.usage) usage = ch.usage;
    if (!ch.choices.length) continue;
    const c = ch.choices[0];
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  check('chat stream: role, text, finish_reason, usage chunk',
        role === 'assistant' && ['stop', 'length'].includes(finish) && usage && usage.completion_tokens >= 1,
        JSON.stringify({ role, finish, usage, n }));
  check('greedy chat stream text equals the non-streamed text', text === chat.choices[0].message.content,
        JSON.stringify([text, chat.choices[0].message.content]));

  const comp = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  check('completion: text, finish_reason length, usage',
        comp.object === 'text_completion' && typeof comp.choices[0].text === 'string' &&
        comp.choices[0].finish_reason === 'length' && comp.usage.completion_tokens === 12,
        JSON.stringify(comp));

  const cs = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0,
                                               stream: true });
  let ctext = '';
  for await (const ch of cs) ctext += ch.choices[0]?.text ?? '';
  check('completion stream text equals the non-streamed text', ctext === comp.choices[0].text,
        JSON.stringify([ctext, comp.choices[0].text]));

  // logit_bias through the client: +100 on one token makes every generated token that one
  const forced = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 3, temperature: 0,
                                                   logit_bias: { '300': 100 }, logprobs: 0 });
  const ft = forced.choices[0].logprobs?.tokens ?? [];
  const plain = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 3, temperature: 0,
                                                  logit_bias: { '300': -100 }, logprobs: 0 });
  check('logit_bias +100 forces one token, -100 bans it',
        ft.length === 3 && new Set(ft).size === 1 && !(plain.choices[0].logprobs?.tokens ?? []).includes(ft[0]),
        JSON.stringify([ft, plain.choices[0].logprobs]));

  try {
    await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], temperature: 7 });
    check('temperature 7 is rejected', false);
  } catch (e) {
    check('temperature 7 -> BadRequestError naming the parameter',
          e instanceof OpenAI.BadRequestError && e.status === 400 && e.error?.param === 'temperature',
          String(e));
  }
  try {
    await new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'wrong', maxRetries: 0 })
      .chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] });
    check('a wrong key is rejected', false);
  } catch (e) {
    check('wrong key -> AuthenticationError', e instanceof OpenAI.AuthenticationError && e.status === 401, String(e));
  }
  try {
    await client.chat.completions.create({ model: 'not-' + model, messages: [{ role: 'user', content: 'x' }] });
    check('an unknown model is rejected', false);
  } catch (e) {
    check('unknown model -> NotFoundError (404, as OpenAI and vLLM)',
          e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found', String(e));
  }
} catch (e) {
  check('no unexpected exception', false, String(e?.stack ?? e));
}
console.log(`${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);
