// lanes.mjs drives loom's WebSocket mode with the openai npm package's
// Responses WebSocket client (beta, which sends response.inject) and its
// lane helper (ResponsesWebSocketSession, which routes events by
// stream_id), and prints a JSON summary for
// integration/websocketlanes_test.go to assert on.
//
// Usage: LOOM_BASE_URL=http://127.0.0.1:PORT/v1 node lanes.mjs CASE
// where CASE is "lanes" or "inject". The inputs are directives for loom's
// scripted upstream (model/mockllm); the test's server tool "a1" waits
// until the test lets it go (see the test for when).
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/beta/responses/ws';
import { ResponsesWebSocketSession } from 'openai/lib/responses/responses-websocket-session';

const model = 'mock-model';
const client = new OpenAI({ baseURL: process.env.LOOM_BASE_URL, apiKey: 'x', maxRetries: 0 });
const fakeTools = [{ type: 'fake' }];

async function open() {
  const ws = new ResponsesWS(client);
  await new Promise((resolve, reject) => {
    ws.socket.on('open', resolve);
    ws.socket.on('error', reject);
  });
  const session = new ResponsesWebSocketSession(ws, { maxLanes: 8, maxBufferedEvents: 100000, maxBufferedBytes: 1 << 26 });
  return { ws, session };
}

// readLane reads a lane's events up to its response's end and summarises
// them: the types, the stream_ids seen, the text, the response id.
async function readLane(lane, order) {
  const out = { types: [], streams: [], text: '', id: '' };
  for (;;) {
    const ev = await lane.receive();
    out.types.push(ev.type);
    if (!out.streams.includes(ev.stream_id)) {
      out.streams.push(ev.stream_id ?? null);
    }
    if (ev.type === 'response.created') {
      out.id = ev.response.id;
    }
    if (ev.type === 'response.output_text.delta') {
      out.text += ev.delta;
    }
    if (['error', 'response.completed', 'response.failed', 'response.incomplete'].includes(ev.type)) {
      order.push(lane.streamID);
      return out;
    }
  }
}

// lanes: lane "slow" runs a server tool that waits; lane "fast" runs and
// completes meanwhile; then lane "go" tells the test (through the upstream
// request it makes) to let the tool go, and "slow" completes.
async function lanesCase() {
  const { ws, session } = await open();
  const order = [];
  const slow = session.lane('slow');
  const fast = session.lane('fast');
  const go = session.lane('go');
  slow.create({ model, input: '#call a1 {}\n#then\n#say slow is done', tools: fakeTools });
  const slowDone = readLane(slow, order);
  fast.create({ model, input: '#say fast is done' });
  const fastOut = await readLane(fast, order);
  go.create({ model, input: '#say go' });
  const goOut = await readLane(go, order);
  const slowOut = await slowDone;
  ws.close();
  return { order, slow: slowOut, fast: fastOut, go: goOut };
}

// inject: a response on lane "work" runs a server tool that waits; the
// client injects a message into it, then sends a response on lane "sync"
// (the test lets the tool go once the upstream has seen that one: the
// injection came before it); the response's next turn reads the injected
// message. An injection once it has ended is refused.
async function injectCase() {
  const { ws, session } = await open();
  const order = [];
  const work = session.lane('work');
  const sync = session.lane('sync');
  work.create({ model, input: '#call a1 {}\n#then\n#say not injected', tools: fakeTools });
  const first = await work.receive();
  const id = first.response.id;
  ws.send({ type: 'response.inject', response_id: id, input: [{ type: 'message', role: 'user', content: '#say I read the injected note' }] });
  sync.create({ model, input: '#say synced' });
  await readLane(sync, order);
  const rest = await readLane(work, order);
  rest.types.unshift(first.type);
  rest.id = id;
  ws.send({ type: 'response.inject', response_id: id, input: [{ type: 'message', role: 'user', content: 'too late' }] });
  const late = await work.receive();
  ws.close();
  return { work: rest, late: { type: late.type, code: late.error?.code, response_id: late.response_id, stream_id: late.stream_id, input: late.input } };
}

const cases = { lanes: lanesCase, inject: injectCase };
const name = process.argv[2];
if (!cases[name]) {
  console.error(`unknown case ${name}`);
  process.exit(2);
}
const out = await cases[name]();
console.log(JSON.stringify(out));
process.exit(0);
