fn describe_cluster() {
    let v = vec![
        0, 0, 0, 27, 0, 60, 0, 1, 0, 0, 0, 7, 0, 13, 97, 100, 109, 105, 110, 99, 108, 105, 101,
        110, 116, 45, 49, 0, 0, 1, 0,
    ];
    let frame = Frame::request_from_bytes(&v[..]).unwrap();
    assert_eq!(frame.header.correlation_id(), 7);
}
