// kafkajs (a client kdissect was never tested with): produce three records and read them
// back in a consumer group.   node kafkajs-session.js BOOTSTRAP TOPIC
const { Kafka, logLevel } = require("kafkajs");
const [bootstrap, topic] = process.argv.slice(2);
const kafka = new Kafka({ clientId: "kd-kafkajs", brokers: bootstrap.split(","), logLevel: logLevel.NOTHING });

(async () => {
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic, messages: [0, 1, 2].map((i) => ({ key: "k" + i, value: "js" + i })) });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: "kd-kafkajs-group" });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    setTimeout(() => reject(new Error("kafkajs read " + got.length + " records")), 60000);
    consumer.run({ eachMessage: async ({ message }) => {
      got.push(message.value.toString());
      if (got.length === 3) resolve();
    } });
  });
  await consumer.disconnect();
  console.log(got.join(" "));
})().catch((e) => { console.error(e); process.exit(1); });
