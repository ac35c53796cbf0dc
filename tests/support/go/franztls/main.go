// A franz-go (github.com/twmb/franz-go) client over TLS for the TLS captures: produces
// RECORDS records to TOPIC and consumes them back in a consumer group, writing the TLS
// session keys (NSS key log) to KEYLOG. Prints the values it read.
//
//	go run . BOOTSTRAP CAFILE KEYLOG TOPIC RECORDS
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: franztls BOOTSTRAP CAFILE KEYLOG TOPIC RECORDS")
		os.Exit(2)
	}
	bootstrap, cafile, keylog, topic := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	n, err := strconv.Atoi(os.Args[5])
	check(err)
	pem, err := os.ReadFile(cafile)
	check(err)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		check(fmt.Errorf("no certificate in %s", cafile))
	}
	keys, err := os.OpenFile(keylog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	check(err)
	defer keys.Close()
	tlsConf := &tls.Config{RootCAs: pool, KeyLogWriter: keys, ServerName: "127.0.0.1"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DialTLSConfig(tlsConf),
		kgo.ClientID("kd-franz"), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	check(err)
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: []byte("k"), Value: []byte(fmt.Sprintf("franz %d", i))}
		check(producer.ProduceSync(ctx, r).FirstErr())
	}
	producer.Close()

	consumer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DialTLSConfig(tlsConf),
		kgo.ClientID("kd-franz-reader"), kgo.ConsumerGroup("kd-franz-group"),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	check(err)
	got := 0
	for got < n {
		fetches := consumer.PollFetches(ctx)
		check(ctx.Err())
		fetches.EachRecord(func(r *kgo.Record) {
			fmt.Println(string(r.Value))
			got++
		})
	}
	check(consumer.CommitUncommittedOffsets(ctx))
	consumer.Close()
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "franztls:", err)
		os.Exit(1)
	}
}
