// agents.mjs runs an agent of the Agents SDK (@openai/agents) with one
// function tool against loom, and prints a JSON summary for
// integration/agents_test.go to assert on.
//
// Usage: LOOM_BASE_URL=http://127.0.0.1:PORT/v1 node agents.mjs CASE
// where CASE is one of the keys of `cases` below. The inputs are directives
// for loom's scripted upstream (model/mockllm).
import OpenAI from 'openai';
import * as agents from '@openai/agents';

const model = 'mock-model';

const cases = {
  // The model calls get_weather, which the agent does not have, then
  // answers: the run completes with the answer.
  unknown_tool: { input: '#call get_weather {"city": "Paris"}\n#then\n#say I have no weather tool.' },
  // The same, streamed.
  unknown_tool_stream: { input: '#call get_weather {"city": "Paris"}\n#then\n#say I have no weather tool.', stream: true },
  // In one turn the model calls get_weather (not offered) and get_time
  // (the agent's): the agent runs get_time, and the model answers.
  unknown_and_known: { input: '#call get_weather {"city": "Paris"}\n#call get_time {}\n#then\n#say It is noon.' },
};

async function main() {
  const name = process.argv[2];
  const c = cases[name];
  if (!c) throw new Error(`unknown case ${JSON.stringify(name)}; want one of ${Object.keys(cases)}`);
  const client = new OpenAI({ baseURL: process.env.LOOM_BASE_URL, apiKey: 'x', maxRetries: 0, timeout: 15000 });
  agents.setTracingDisabled(true);
  agents.setDefaultOpenAIClient(client);
  agents.setOpenAIAPI('responses');

  const toolRuns = [];
  const getTime = agents.tool({
    name: 'get_time',
    description: 'The time of day.',
    parameters: { type: 'object', properties: {}, required: [], additionalProperties: false },
    strict: false,
    execute: async () => {
      toolRuns.push('get_time');
      return '12:00 sharp';
    },
  });
  const agent = new agents.Agent({ name: 'Assistant', instructions: 'Answer briefly.', model, tools: [getTime] });

  let result;
  if (c.stream) {
    result = await agents.run(agent, c.input, { stream: true });
    for await (const _ of result.toStream()) {
      // drain the events
    }
    await result.completed;
    if (result.error) throw result.error;
  } else {
    result = await agents.run(agent, c.input);
  }
  const outputTypes = result.rawResponses.map((r) => r.output.map((it) => it.type + (it.name ? `:${it.name}` : '')));
  console.log(JSON.stringify({ case: name, finalOutput: result.finalOutput, toolRuns, outputTypes }));
}

main().catch((err) => {
  console.error(err?.stack ?? String(err));
  process.exit(1);
});
