// conversations.mjs drives loom's Conversations API with the openai npm
// package and runs an agent of the Agents SDK (@openai/agents) over a
// conversation, and prints a JSON summary for
// integration/node_conversations_test.go to assert on.
//
// Usage: LOOM_BASE_URL=http://127.0.0.1:PORT/v1 node conversations.mjs CASE
// where CASE is "client" or "agents". The inputs are directives for loom's
// scripted upstream (model/mockllm).
import OpenAI from 'openai';

const model = 'mock-model';
const client = new OpenAI({ baseURL: process.env.LOOM_BASE_URL, apiKey: 'x', maxRetries: 0 });

const itemText = (it) => (it.content ?? []).map((c) => c.text ?? '').join('');

async function clientCase() {
  const conv = await client.conversations.create({
    metadata: { topic: 'colours' },
    items: [{ type: 'message', role: 'user', content: 'my favourite colour is teal' }],
  });
  const first = await client.responses.create({ model, input: '#say noted, teal', conversation: conv.id });
  const second = await client.responses.create({ model, input: '#say it was teal\nwhat was my colour?', conversation: { id: conv.id } });
  const items = [];
  for await (const it of client.conversations.items.list(conv.id, { order: 'asc' })) {
    items.push({ id: it.id, role: it.role, text: itemText(it) });
  }
  const retrieved = await client.conversations.retrieve(conv.id);
  const afterDelete = await client.conversations.items.delete(items[0].id, { conversation_id: conv.id });
  const left = [];
  for await (const it of client.conversations.items.list(conv.id, { order: 'asc' })) {
    left.push(it.id);
  }
  return {
    conversation: conv.id, metadata: retrieved.metadata, retrievedID: retrieved.id, deleteReturned: afterDelete.id,
    responses: [first, second].map((r) => ({ id: r.id, text: r.output_text, conversation: r.conversation?.id })),
    items, left,
  };
}

async function agentsCase() {
  const agents = await import('@openai/agents');
  agents.setTracingDisabled(true);
  agents.setDefaultOpenAIClient(client);
  agents.setOpenAIAPI('responses');
  const agent = new agents.Agent({ name: 'Assistant', instructions: 'Answer briefly.', model });
  const conv = await client.conversations.create({});
  const first = await agents.run(agent, '#say hello from the agent', { conversationId: conv.id });
  const second = await agents.run(agent, '#say still here\nwhat did you say?', { conversationId: conv.id });
  const items = [];
  for await (const it of client.conversations.items.list(conv.id, { order: 'asc' })) {
    items.push({ id: it.id, role: it.role, text: itemText(it) });
  }
  return { conversation: conv.id, outputs: [first.finalOutput, second.finalOutput], items };
}

const cases = { client: clientCase, agents: agentsCase };
const name = process.argv[2];
if (!cases[name]) {
  console.error(`unknown case ${name}`);
  process.exit(2);
}
const out = await cases[name]();
console.log(JSON.stringify({ case: name, ...out }));
