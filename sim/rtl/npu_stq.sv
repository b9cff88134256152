// npu_stq: the write path of STORE.
//
// Takes one row (VA, length, data) at a time, translates it (one-entry TLB, checked in the
// accept cycle), and writes it as posted 16-byte beats with byte strobes. A row within one page
// that hits the TLB starts its beats on the accept edge; a miss or a page-crossing row reads
// the PTE(s) first. A fault is detected before any byte of its row is written and stops the
// queue (err_o, sticky until clear_i); rows before it are complete, as architecture.md 1.4
// requires. A write into the page table flushes this TLB and pulses pt_write_o so that the
// other translation caches flush too.
module npu_stq
  import npu_config_pkg::*;
#(
  parameter int unsigned ROW_BYTES = 64,
  parameter int unsigned BEAT_BYTES = 16
) (
  input  logic                      clk_i,
  input  logic                      rst_ni,
  input  logic                      hold_i,
  input  logic                      clear_i,
  input  logic                      tlb_flush_i,
  input  logic [31:0]               pt_base_i,
  input  logic [32:0]               dram_bytes_i,

  input  logic                      req_valid_i,
  output logic                      req_ready_o,
  input  logic [31:0]               req_va_i,
  input  logic [7:0]                req_len_i,
  input  logic [ROW_BYTES*8-1:0]    req_data_i,

  output logic                      row_done_o,   // pulse: a row's last beat was accepted
  output logic [7:0]                row_len_o,
  output logic                      idle_o,
  output logic                      err_o,
  output logic [7:0]                err_code_o,
  output logic [31:0]               err_addr_o,
  output logic                      pt_write_o,
  output logic                      stall_o,

  output logic                      mem_req_valid_o,
  input  logic                      mem_req_ready_i,
  output logic                      mem_req_write_o,
  output logic [31:0]               mem_req_addr_o,
  output logic [BEAT_BYTES*8-1:0]   mem_req_wdata_o,
  output logic [BEAT_BYTES-1:0]     mem_req_wstrb_o,
  input  logic                      mem_rsp_valid_i,
  input  logic [BEAT_BYTES*8-1:0]   mem_rsp_data_i
);
  localparam int unsigned BB = BEAT_BYTES * 8;
  localparam int unsigned RB = ROW_BYTES * 8;
  localparam int unsigned MAXBEATS = ROW_BYTES / BEAT_BYTES + 1;
  localparam int unsigned BUFB = MAXBEATS * BB;
  localparam int unsigned OFFW = $clog2(BEAT_BYTES);
  localparam int unsigned BCW = $clog2(MAXBEATS + 1);
  localparam longint unsigned PT_BYTES = (64'd1 << VA_BITS) / PAGE_BYTES * 4;

  typedef enum logic [2:0] { T_IDLE, T_XL, T_PTE_WAIT, T_CHK, T_SETUP, T_BEAT } tstate_e;
  tstate_e t_st_q;
  logic        err_q;
  logic [31:0] va_q, va1_q;
  logic [7:0]  rlen_q;
  logic [RB-1:0] data_q;
  logic [8:0]  len0_q, len1_q;
  logic        two_q, piece_q;
  logic [31:0] pa0_q, pa1_q;
  logic [31:0] pte_q;
  logic [OFFW-3:0] pte_word_q;
  logic        tlb_v_q;
  logic [15:0] tlb_page_q;
  logic [31:0] tlb_pte_q;
  logic [BUFB-1:0]   buf_q;
  logic [BUFB/8-1:0] strb_q;
  logic [31:0]       base_q;      // beat-aligned address of the current piece
  logic [BCW-1:0]    beat_q, nbeats_q;

  logic bus_busy;
  assign bus_busy = mem_req_valid_o && !mem_req_ready_i;

  logic        fast_cross, fast_hit;
  logic [31:0] fast_pa;
  assign fast_cross = (17'(req_va_i[15:0]) + 17'(req_len_i)) > 17'h10000;
  assign fast_hit = tlb_v_q && tlb_page_q == req_va_i[31:16] && !tlb_flush_i;
  assign fast_pa = {tlb_pte_q[31:16], req_va_i[15:0]};

  assign req_ready_o = (t_st_q == T_IDLE) && !err_q && !bus_busy;
  assign idle_o = (t_st_q == T_IDLE) && !mem_req_valid_o;
  assign err_o = err_q;
  assign stall_o = (t_st_q == T_PTE_WAIT);

  function automatic logic [BCW-1:0] beats_for(input logic [OFFW-1:0] off, input logic [8:0] len);
    logic [9:0] span;
    span = 10'(off) + 10'(len) + 10'(BEAT_BYTES - 1);
    return BCW'(span >> OFFW);
  endfunction

  function automatic logic out_of_dram(input logic [33:0] pa, input logic [8:0] len,
                                       input logic [32:0] size);
    return (pa + 34'(len)) > 34'(size);
  endfunction

  // [pa, pa + len) overlaps the job's page table.
  function automatic logic hits_pt(input logic [31:0] pa, input logic [8:0] len,
                                   input logic [31:0] pt);
    return ({2'b00, pa} + 34'(len) > {2'b00, pt}) && ({2'b00, pa} < {2'b00, pt} + 34'(PT_BYTES));
  endfunction

  always_ff @(posedge clk_i) begin
    if (!rst_ni || clear_i) begin
      t_st_q <= T_IDLE;
      err_q <= 1'b0;
      err_code_o <= ERR_NONE;
      err_addr_o <= '0;
      tlb_v_q <= 1'b0;
      mem_req_valid_o <= 1'b0;
      mem_req_write_o <= 1'b0;
      mem_req_addr_o <= '0;
      mem_req_wdata_o <= '0;
      mem_req_wstrb_o <= '0;
      row_done_o <= 1'b0;
      pt_write_o <= 1'b0;
    end else if (!hold_i) begin
      logic        setup;       // start the beats of a translated piece this cycle
      logic [31:0] s_pa;
      logic [8:0]  s_len, s_off;
      logic [RB-1:0] s_data;
      setup = 1'b0;
      s_pa = '0;
      s_len = '0;
      s_off = '0;
      s_data = data_q;
      row_done_o <= 1'b0;
      pt_write_o <= 1'b0;
      if (tlb_flush_i) tlb_v_q <= 1'b0;

      unique case (t_st_q)
        T_IDLE: begin
          if (mem_req_valid_o && mem_req_ready_i) mem_req_valid_o <= 1'b0;
          if (req_valid_i && req_ready_o) begin
            va_q <= req_va_i;
            rlen_q <= req_len_i;
            data_q <= req_data_i;
            piece_q <= 1'b0;
            if (fast_cross) begin
              two_q <= 1'b1;
              len0_q <= 9'(17'h10000 - 17'(req_va_i[15:0]));
              len1_q <= 9'(17'(req_len_i) - (17'h10000 - 17'(req_va_i[15:0])));
              va1_q <= {req_va_i[31:16] + 16'd1, 16'h0000};
              t_st_q <= T_XL;
            end else begin
              two_q <= 1'b0;
              len0_q <= 9'(req_len_i);
              if (!fast_hit) begin
                t_st_q <= T_XL;
              end else if (!tlb_pte_q[0] || !tlb_pte_q[1]) begin
                err_q <= 1'b1;
                err_code_o <= ERR_PAGE_FAULT;
                err_addr_o <= req_va_i;
              end else if (out_of_dram({2'b00, fast_pa}, 9'(req_len_i), dram_bytes_i)) begin
                err_q <= 1'b1;
                err_code_o <= ERR_BUS_ERROR;
                err_addr_o <= fast_pa;
              end else begin
                setup = 1'b1;
                s_pa = fast_pa;
                s_len = 9'(req_len_i);
                s_data = req_data_i;
              end
            end
          end
        end

        T_XL: begin
          logic [15:0] cpage;
          cpage = piece_q ? va1_q[31:16] : va_q[31:16];
          if (tlb_v_q && tlb_page_q == cpage) begin
            pte_q <= tlb_pte_q;
            t_st_q <= T_CHK;
          end else begin
            logic [33:0] pa;
            pa = {2'b00, pt_base_i} + {16'h0, cpage, 2'b00};
            pte_word_q <= pa[OFFW-1:2];
            if (out_of_dram(pa, 9'd4, dram_bytes_i)) begin
              err_q <= 1'b1;
              err_code_o <= ERR_BUS_ERROR;
              err_addr_o <= pa[31:0];
              t_st_q <= T_IDLE;
            end else begin
              mem_req_valid_o <= 1'b1;
              mem_req_write_o <= 1'b0;
              mem_req_addr_o <= {pa[31:OFFW], OFFW'(0)};
              t_st_q <= T_PTE_WAIT;
            end
          end
        end

        T_PTE_WAIT: begin
          if (mem_req_valid_o && mem_req_ready_i) mem_req_valid_o <= 1'b0;
          if (mem_rsp_valid_i) begin
            logic [31:0] pte;
            pte = mem_rsp_data_i[pte_word_q*32 +: 32];
            pte_q <= pte;
            tlb_v_q <= 1'b1;
            tlb_page_q <= piece_q ? va1_q[31:16] : va_q[31:16];
            tlb_pte_q <= pte;
            t_st_q <= T_CHK;
          end
        end

        T_CHK: begin
          logic [31:0] cva, pa;
          logic [8:0]  clen;
          cva = piece_q ? va1_q : va_q;
          clen = piece_q ? len1_q : len0_q;
          pa = {pte_q[31:16], cva[15:0]};
          if (!pte_q[0] || !pte_q[1]) begin
            err_q <= 1'b1;
            err_code_o <= ERR_PAGE_FAULT;
            err_addr_o <= cva;
            t_st_q <= T_IDLE;
          end else if (out_of_dram({2'b00, pa}, clen, dram_bytes_i)) begin
            err_q <= 1'b1;
            err_code_o <= ERR_BUS_ERROR;
            err_addr_o <= pa;
            t_st_q <= T_IDLE;
          end else begin
            if (piece_q) pa1_q <= pa; else pa0_q <= pa;
            if (!piece_q && two_q) begin
              piece_q <= 1'b1;
              t_st_q <= T_XL;
            end else begin
              piece_q <= 1'b0;
              t_st_q <= T_SETUP;
            end
          end
        end

        T_SETUP: begin
          setup = 1'b1;
          s_pa = piece_q ? pa1_q : pa0_q;
          s_len = piece_q ? len1_q : len0_q;
          s_off = piece_q ? len0_q : 9'd0;
        end

        T_BEAT: begin
          if (!bus_busy) begin
            if (beat_q == nbeats_q) begin
              // The piece's last beat is accepted.
              mem_req_valid_o <= 1'b0;
              if (!piece_q && two_q) begin
                piece_q <= 1'b1;
                t_st_q <= T_SETUP;
              end else begin
                row_done_o <= 1'b1;
                row_len_o <= rlen_q;
                t_st_q <= T_IDLE;
              end
            end else begin
              mem_req_valid_o <= 1'b1;
              mem_req_write_o <= 1'b1;
              mem_req_addr_o <= base_q + 32'({beat_q, OFFW'(0)});
              mem_req_wdata_o <= buf_q[beat_q*BB +: BB];
              mem_req_wstrb_o <= strb_q[beat_q*BEAT_BYTES +: BEAT_BYTES];
              beat_q <= beat_q + 1'b1;
            end
          end
        end

        default: t_st_q <= T_IDLE;
      endcase

      if (setup) begin
        // Align the piece to its beats and issue the first beat now.
        logic [RB-1:0] mask, piece;
        logic [BUFB-1:0] wbuf;
        logic [BUFB/8-1:0] bmask;
        mask = ~({RB{1'b1}} << {s_len, 3'b000});
        piece = (s_data >> {s_off, 3'b000}) & mask;
        wbuf = BUFB'(piece) << {s_pa[OFFW-1:0], 3'b000};
        bmask = ~({(BUFB/8){1'b1}} << s_len) << s_pa[OFFW-1:0];
        buf_q <= wbuf;
        strb_q <= bmask;
        base_q <= {s_pa[31:OFFW], OFFW'(0)};
        nbeats_q <= beats_for(s_pa[OFFW-1:0], s_len);
        beat_q <= BCW'(1);
        mem_req_valid_o <= 1'b1;
        mem_req_write_o <= 1'b1;
        mem_req_addr_o <= {s_pa[31:OFFW], OFFW'(0)};
        mem_req_wdata_o <= wbuf[BB-1:0];
        mem_req_wstrb_o <= bmask[BEAT_BYTES-1:0];
        t_st_q <= T_BEAT;
        // A write into the page table invalidates every cached translation.
        if (hits_pt(s_pa, s_len, pt_base_i)) begin
          tlb_v_q <= 1'b0;
          pt_write_o <= 1'b1;
        end
      end
    end
  end
endmodule
