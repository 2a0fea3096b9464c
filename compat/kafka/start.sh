#!/usr/bin/env bash
# Start a reference Apache Kafka broker (single KRaft combined broker+controller node,
# loopback only) from jars resolved out of Maven Central. Used for differential tests and
# to validate tests/interop against the real thing:
#
#   compat/kafka/start.sh [BROKER_PORT [DATA_DIR [CONTROLLER_PORT]]]
#   PYDMQ_TEST_BOOTSTRAP=127.0.0.1:BROKER_PORT ./scripts/test tests/interop
#
# Defaults: broker 127.0.0.1:19092, controller 127.0.0.1:19093, data in a fresh temp dir.
# Extra broker properties: KAFKA_EXTRA_PROPS="num.partitions=3 foo=bar".
# The script execs the JVM, so its PID is the broker's PID.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${1:-19092}"
data="${2:-$(mktemp -d /tmp/pydmq-refkafka.XXXXXX)}"
cport="${3:-$((port + 1))}"
dist="$here/dist"

if ! ls "$dist"/kafka_2.13-*.jar >/dev/null 2>&1; then
    echo "compat/kafka: resolving Apache Kafka jars into $dist" >&2
    (cd "$here" && mvn -B -q dependency:copy-dependencies -DoutputDirectory=dist -DincludeScope=runtime) >&2
fi

mkdir -p "$data/logs"
props="$data/server.properties"
cat >"$props" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$data/logs
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
PROPS
for kv in ${KAFKA_EXTRA_PROPS:-}; do
    echo "$kv" >>"$props"
done

cp=("$dist"/*.jar)
cp="$(IFS=:; echo "${cp[*]}")"
jvm=(java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true
     -Dorg.slf4j.simpleLogger.defaultLogLevel="${KAFKA_LOG_LEVEL:-warn}" -cp "$cp")

if [ ! -f "$data/logs/meta.properties" ]; then
    cluster_id="$("${jvm[@]}" kafka.tools.StorageTool random-uuid)"
    "${jvm[@]}" kafka.tools.StorageTool format --standalone -t "$cluster_id" -c "$props" >&2
fi
echo "compat/kafka: starting Apache Kafka on 127.0.0.1:$port (data $data)" >&2
exec "${jvm[@]}" kafka.Kafka "$props"
