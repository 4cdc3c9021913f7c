// TensorBoard event files, written without TensorFlow or libprotobuf: what verl's
// `trainer.logger=tensorboard` gets from torch.utils.tensorboard.SummaryWriter.add_scalar.
//
// An event file is a sequence of TFRecords, each
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes) | payload | uint32 masked_crc32c(payload)
// where the payload is a serialized tensorboard.Event (tensorboard/compat/proto/event.proto).
// The first record carries file_version "brain.Event:2"; each later one a Summary of scalar
// Values (tag + simple_value, a float32), as torch writes them. Only those few protobuf fields
// are encoded here, by hand: field numbers and wire types are in the functions below.
// The file is named events.out.tfevents.<10-digit unix time>.<host>.<pid>.0 (torch's pattern;
// TensorBoard picks up any file whose name contains "tfevents").
//
// Pure functions (no I/O) so that tests can compare bytes; TensorboardLogger in tracking.h
// writes them. Thread-safe: no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace verl::trainer::tfevents {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses it.
uint32_t crc32c(const void* data, size_t size);
// TFRecord's masking of a CRC stored next to the data it covers:
// ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);

// One TFRecord around a payload.
std::string frame_record(const std::string& payload);

// Serialized Event messages.
std::string file_version_event(double wall_time);
// A SessionLog with status START at step: TensorBoard drops the points of this run's earlier
// files at steps >= step (what SummaryWriter(purge_step=step) writes after a restart).
std::string session_start_event(double wall_time, int64_t step);
// Non-finite values are written as they are (float NaN / inf): TensorBoard shows them as such.
std::string scalars_event(double wall_time, int64_t step, const std::map<std::string, double>& scalars);

// "events.out.tfevents.<time>.<host>.<pid>.0".
std::string event_file_name(int64_t unix_time, const std::string& host, int64_t pid);

}  // namespace verl::trainer::tfevents
