// request.mjs streams one request, given whole as JSON in argv[2], with
// the openai npm package's strict responses.stream() helper (which throws
// on unknown event types and on broken event order), and prints a JSON
// summary for the Go test that wrote the request to assert on.
//
// Usage: LOOM_BASE_URL=http://127.0.0.1:PORT/v1 node request.mjs '{"model":...}'
import OpenAI from 'openai';

async function main() {
  const params = JSON.parse(process.argv[2] ?? 'null');
  if (!params) throw new Error('no request given');
  const baseURL = process.env.LOOM_BASE_URL;
  if (!baseURL) throw new Error('LOOM_BASE_URL is not set');
  const client = new OpenAI({ baseURL, apiKey: 'x', maxRetries: 0, timeout: 15000 });
  const stream = client.responses.stream(params);
  const summary = { types: [], sequence: [], text: '' };
  for await (const event of stream) {
    summary.types.push(event.type);
    summary.sequence.push(event.sequence_number);
    if (event.type === 'response.output_text.delta') summary.text += event.delta;
  }
  const final = await stream.finalResponse();
  summary.id = final.id;
  summary.status = final.status;
  summary.outputText = final.output_text;
  summary.output = final.output;
  process.stdout.write(JSON.stringify(summary) + '\n');
}

main().catch((err) => {
  process.stderr.write(`request.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
