// stream.mjs drives loom with the openai npm package's strict
// responses.stream() helper, which throws on unknown event types and on
// broken event order, and prints a JSON summary of what it saw for
// integration/node_test.go to assert on.
//
// Usage: LOOM_BASE_URL=http://127.0.0.1:PORT/v1 node stream.mjs CASE
// where CASE is one of the keys of `cases` below. The scripts are
// directives for loom's scripted upstream (model/mockllm).
import OpenAI from 'openai';

const model = 'mock-model';

const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  strict: false,
};

const cases = {
  text: { input: '#say Hello from the node client.' },
  reasoning: { input: '#reason First think, then answer.\n#say Thought about it.' },
  // The model calls get_weather; the script answers it with
  // previous_response_id, and the model then says what the tool said.
  function: {
    input: '#call get_weather {"city": "Paris"}\n#then',
    tools: [weatherTool],
    toolOutput: '{"sky": "sunny"}',
  },
  // Harmony only: a preamble (an assistant message with phase
  // "commentary") before the call, then the round trip.
  preamble: {
    input: '#preamble Let me check.\n#call get_weather {"city": "Paris"}\n#then',
    tools: [weatherTool],
    toolOutput: '{"sky": "sunny"}',
  },
  // A function of a namespace tool: the call comes back with its
  // namespace (harmony: the model calls crm.search; chat: crm__search).
  namespace: {
    input: process.env.LOOM_UPSTREAM === 'completions'
      ? '#callns crm.search {"q": "ada"}\n#then'
      : '#call crm__search {"q": "ada"}\n#then',
    tools: [{
      type: 'namespace',
      name: 'crm',
      description: 'The customer database.',
      tools: [{ type: 'function', name: 'search', description: 'Finds a customer.', parameters: { type: 'object', properties: { q: { type: 'string' } } } }],
    }],
    toolOutput: 'Ada Lovelace',
  },
  // A custom tool: free-text input, answered with custom_tool_call_output.
  custom: {
    input: '#call note {"input": "buy milk"}\n#then',
    tools: [{ type: 'custom', name: 'note', description: 'Writes a note.', format: { type: 'text' } }],
    callType: 'custom_tool_call',
    outputType: 'custom_tool_call_output',
    toolOutput: 'noted',
  },
  // apply_patch: the client applies the edit and answers with its status.
  apply_patch: {
    input: '#call apply_patch {"type": "create_file", "path": "hello.txt", "diff": "+hello"}\n#then',
    tools: [{ type: 'apply_patch' }],
    callType: 'apply_patch_call',
    outputType: 'apply_patch_call_output',
    toolOutput: 'Created hello.txt',
  },
};

// run streams one response and summarises it.
async function run(client, params) {
  const stream = client.responses.stream({ model, ...params });
  const summary = { types: [], sequence: [], text: '', reasoning: '', arguments: '', customInput: '', customDone: '' };
  for await (const event of stream) {
    summary.types.push(event.type);
    summary.sequence.push(event.sequence_number);
    if (event.type === 'response.output_text.delta') summary.text += event.delta;
    if (event.type === 'response.reasoning_text.delta') summary.reasoning += event.delta;
    if (event.type === 'response.function_call_arguments.delta') summary.arguments += event.delta;
    if (event.type === 'response.custom_tool_call_input.delta') summary.customInput += event.delta;
    if (event.type === 'response.custom_tool_call_input.done') summary.customDone = event.input;
  }
  const final = await stream.finalResponse();
  summary.id = final.id;
  summary.status = final.status;
  summary.outputText = final.output_text;
  summary.output = final.output;
  summary.usage = final.usage;
  return summary;
}

async function main() {
  const name = process.argv[2];
  const c = cases[name];
  if (!c) throw new Error(`unknown case ${JSON.stringify(name)}; want one of ${Object.keys(cases)}`);
  const baseURL = process.env.LOOM_BASE_URL;
  if (!baseURL) throw new Error('LOOM_BASE_URL is not set');
  const client = new OpenAI({ baseURL, apiKey: 'x', maxRetries: 0, timeout: 15000 });

  const first = await run(client, { input: c.input, tools: c.tools });
  const result = { case: name, first };
  if (c.toolOutput !== undefined) {
    const callType = c.callType ?? 'function_call';
    const call = first.output.find((item) => item.type === callType);
    if (!call) throw new Error(`the model made no ${callType}`);
    const output = { type: c.outputType ?? 'function_call_output', call_id: call.call_id, output: c.toolOutput };
    if (output.type === 'apply_patch_call_output') output.status = 'completed';
    result.second = await run(client, {
      previous_response_id: first.id,
      input: [output],
      tools: c.tools,
    });
  }
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((err) => {
  process.stderr.write(`stream.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
